#!/bin/sh
# SPDX-License-Identifier: MIT
# check-inlines.sh CC INCLUDE_DIR TABLE: every static inline function that the
# bundled infiniband/verbs.h, rdma/rdma_cma.h and rdma/rdma_verbs.h define, and
# every function-like ibv_*/rdma_* macro they define, must be in TABLE
# (ffi/inlines.def), under the right header; and
# every table entry must still exist there. The compiler is the parser: a probe
# including the three headers is compiled with every unused inline function
# kept (-fkeep-inline-functions, or clang's -femit-all-decls), nm -l says which
# header each came from, and -E -dM lists the macros. RDMA_STATIC_PROVIDERS is
# defined so that the static-linking-only parts are seen too, and
# __always_inline__ is defined away (to __unused__) so that those functions are
# emitted as well.
set -eu
cc=$1 inc=$2 table=$3
[ -d "$inc/infiniband" ] || { echo "check-inlines: $inc: no infiniband/ headers" >&2; exit 2; }
[ -r "$table" ] || { echo "check-inlines: cannot read $table" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/probe.c" <<'EOC'
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
EOC
if "$cc" --version 2>/dev/null | grep -qi clang; then keep=-femit-all-decls; else keep=-fkeep-inline-functions; fi
flags="-std=gnu11 -O0 -g -w -DRDMA_STATIC_PROVIDERS=none -D__always_inline__=__unused__ -isystem $inc"
# shellcheck disable=SC2086 # flags are words
"$cc" $flags $keep -c "$tmp/probe.c" -o "$tmp/probe.o"
# shellcheck disable=SC2086
"$cc" $flags -E -dM "$tmp/probe.c" >"$tmp/macros"
nm -l --defined-only "$tmp/probe.o" | awk 'NF >= 4 && ($2 == "t" || $2 == "T") {
    file = $4; sub(/:[0-9]+$/, "", file)
    if (file ~ /\/infiniband\/verbs\.h$/) h = "VERBS"
    else if (file ~ /\/rdma\/rdma_cma\.h$/) h = "RDMA_CMA"
    else if (file ~ /\/rdma\/rdma_verbs\.h$/) h = "RDMA_VERBS"
    else next
    print h, $3 }' | LC_ALL=C sort -u >"$tmp/inlines"
sed -n 's/^#define \(\(ibv\|rdma\)_[A-Za-z0-9_]*\)(.*/\1/p' "$tmp/macros" | LC_ALL=C sort -u >"$tmp/macro-names"
# "KIND HEADER name" per entry (the format ffi/CMakeLists.txt parses).
sed -n 's/^RDMADL_FFI(\([A-Z]*\), \([A-Z_]*\), [^,]*, \([A-Za-z_0-9]*\), (.*/\1 \2 \3/p' "$table" >"$tmp/table"
[ -s "$tmp/table" ] || { echo "check-inlines: $table has no RDMADL_FFI entry" >&2; exit 2; }
awk '$1 == "INLINE" || $1 == "IMPL" {print $2, $3}' "$tmp/table" | LC_ALL=C sort -u >"$tmp/t-inlines"
awk '$1 == "MACRO" {print $3}' "$tmp/table" | LC_ALL=C sort -u >"$tmp/t-macros"
[ -s "$tmp/inlines" ] || { echo "check-inlines: the probe showed no inline function (nm -l without debug info?)" >&2; exit 2; }
status=0
report() { # FILE MESSAGE
  if [ -s "$1" ]; then
    echo "check-inlines: $2:"
    sed 's/^/  /' "$1"
    status=1
  fi
}
comm -23 "$tmp/inlines" "$tmp/t-inlines" >"$tmp/a"
report "$tmp/a" "inline functions of the bundled headers not in ffi/inlines.def (HEADER name)"
comm -13 "$tmp/inlines" "$tmp/t-inlines" >"$tmp/b"
report "$tmp/b" "ffi/inlines.def entries the bundled headers do not define there (HEADER name)"
comm -23 "$tmp/macro-names" "$tmp/t-macros" >"$tmp/c"
report "$tmp/c" "function-like ibv_*/rdma_* macros not in ffi/inlines.def as MACRO"
comm -13 "$tmp/macro-names" "$tmp/t-macros" >"$tmp/d"
report "$tmp/d" "MACRO entries of ffi/inlines.def the bundled headers do not define"
echo "check-inlines: headers define $(wc -l <"$tmp/inlines") inline functions and $(wc -l <"$tmp/macro-names") function-like ibv_*/rdma_* macros; table: $(wc -l <"$tmp/t-inlines") + $(wc -l <"$tmp/t-macros"): $([ $status = 0 ] && echo equal || echo DIFFERENT)"
exit $status
