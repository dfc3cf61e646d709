#!/bin/sh
# SPDX-License-Identifier: MIT
# check-inlines.sh CC INCLUDE_DIR TABLE: every static inline function that a
# header TABLE (ffi/inlines.def) lists with RDMADL_FFI_HEADER defines, and
# every function-like macro those headers define in an rdma-core name space
# (ibv_, rdma_, mlx5dv_, mlx4dv_, efadv_, hnsdv_, manadv_, ionic_dv_, umad_),
# must be in TABLE, under the right header; and every table entry must still
# exist there.
# The compiler is the parser: each listed header is compiled alone with every
# unused inline function kept (-fkeep-inline-functions, or clang's
# -femit-all-decls), nm -l says which functions that header itself defines
# (not the ones it includes), and -E -dM lists the macros. Alone, so that a
# function two headers define under #ifndef is seen in both. Every other
# header under INCLUDE_DIR that has the word "inline" in it (in any case: an
# inline function needs it, or a macro like MLX5DV_ALWAYS_INLINE) is compiled
# the same way and must define no inline function: a header bundled later
# that defines one fails here until the table lists it.
# RDMA_STATIC_PROVIDERS is defined so that the static-linking-only parts are
# seen too, and always_inline is defined away (to unused, both spellings:
# verbs.h writes __always_inline__, mlx5dv.h and mlx4dv.h always_inline) so
# that those functions are emitted as well. On x86 the headers are compiled
# with -mssse3, so that mlx5dv.h's SSE variants (OMIT in the table) are seen;
# elsewhere the table's *_x86_* entries are not compared.
set -eu
cc=$1 inc=$2 table=$3
[ -d "$inc/infiniband" ] || { echo "check-inlines: $inc: no infiniband/ headers" >&2; exit 2; }
[ -r "$table" ] || { echo "check-inlines: cannot read $table" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# "TOKEN path" per listed header.
sed -n 's/^RDMADL_FFI_HEADER(\([A-Z_0-9]*\), \([^,]*\), [A-Z]*)$/\1 \2/p' "$table" >"$tmp/headers"
[ -s "$tmp/headers" ] || { echo "check-inlines: $table has no RDMADL_FFI_HEADER line" >&2; exit 2; }
if "$cc" --version 2>/dev/null | grep -qi clang; then keep=-femit-all-decls; else keep=-fkeep-inline-functions; fi
flags="-std=gnu11 -O0 -g -w -DRDMA_STATIC_PROVIDERS=none -D__always_inline__=__unused__"
flags="$flags -Dalways_inline=unused -isystem $inc"
if "$cc" -dM -E - </dev/null | grep -Eq '^#define (__x86_64__|__i386__) '; then
  flags="$flags -mssse3" x86=1
else
  x86=0
fi
while read -r token path; do
  [ -r "$inc/$path" ] || { echo "check-inlines: $table lists $path, which $inc lacks" >&2; exit 2; }
  echo "#include <$path>"
done <"$tmp/headers" >"$tmp/all.c"
# Every header of the bundle: "TOKEN path", TOKEN "-" when the table lacks it.
(cd "$inc" && find . -name '*.h' | sed 's|^\./||') | LC_ALL=C sort | awk '
    NR == FNR { token[$2] = $1; next }
    { print ($1 in token ? token[$1] : "-"), $1 }' "$tmp/headers" - >"$tmp/bundle"
: >"$tmp/found"
while read -r token path; do
  [ "$token" != - ] || grep -qi inline "$inc/$path" || continue
  echo "#include <$path>" >"$tmp/probe.c"
  # shellcheck disable=SC2086 # flags are words
  "$cc" $flags $keep -c "$tmp/probe.c" -o "$tmp/probe.o"
  nm -l --defined-only "$tmp/probe.o" | awk -v h="$token" -v p="$path" 'NF >= 4 && ($2 == "t" || $2 == "T") {
      file = $4; sub(/:[0-9]+$/, "", file)
      if (substr(file, length(file) - length(p)) == "/" p) print h, p, $3 }' >>"$tmp/found"
done <"$tmp/bundle"
awk '$1 != "-" {print $1, $3}' "$tmp/found" | LC_ALL=C sort -u >"$tmp/inlines"
awk '$1 == "-" {print $2, $3}' "$tmp/found" | LC_ALL=C sort -u >"$tmp/unlisted"
# shellcheck disable=SC2086
"$cc" $flags -E -dM "$tmp/all.c" >"$tmp/macros"
sed -n 's/^#define \(\(ibv\|rdma\|mlx5dv\|mlx4dv\|efadv\|hnsdv\|manadv\|ionic_dv\|umad\)_[A-Za-z0-9_]*\)(.*/\1/p' \
  "$tmp/macros" | LC_ALL=C sort -u >"$tmp/macro-names"
# "KIND HEADER name" per entry (the format ffi/CMakeLists.txt parses).
sed -n 's/^RDMADL_FFI(\([A-Z]*\), \([A-Z_0-9]*\), [^,]*, \([A-Za-z_0-9]*\), (.*/\1 \2 \3/p' "$table" >"$tmp/table"
[ -s "$tmp/table" ] || { echo "check-inlines: $table has no RDMADL_FFI entry" >&2; exit 2; }
awk -v x86=$x86 '($1 == "INLINE" || $1 == "IMPL" || $1 == "OMIT") && (x86 || $3 !~ /_x86_/) {print $2, $3}' \
  "$tmp/table" | LC_ALL=C sort -u >"$tmp/t-inlines"
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
report "$tmp/unlisted" "inline functions of bundled headers ffi/inlines.def has no RDMADL_FFI_HEADER line for (path name)"
comm -23 "$tmp/inlines" "$tmp/t-inlines" >"$tmp/a"
report "$tmp/a" "inline functions of the bundled headers not in ffi/inlines.def (HEADER name)"
comm -13 "$tmp/inlines" "$tmp/t-inlines" >"$tmp/b"
report "$tmp/b" "ffi/inlines.def entries the bundled headers do not define there (HEADER name)"
comm -23 "$tmp/macro-names" "$tmp/t-macros" >"$tmp/c"
report "$tmp/c" "function-like macros of rdma-core's name spaces not in ffi/inlines.def as MACRO"
comm -13 "$tmp/macro-names" "$tmp/t-macros" >"$tmp/d"
report "$tmp/d" "MACRO entries of ffi/inlines.def the bundled headers do not define"
echo "check-inlines: $(wc -l <"$tmp/bundle") headers, $(wc -l <"$tmp/headers") listed, define $(wc -l <"$tmp/inlines") inline functions and $(wc -l <"$tmp/macro-names") function-like macros; table: $(wc -l <"$tmp/t-inlines") + $(wc -l <"$tmp/t-macros"): $([ $status = 0 ] && echo equal || echo DIFFERENT)"
exit $status
