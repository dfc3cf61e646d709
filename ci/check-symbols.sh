#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-symbols.sh RELEASES_DIR: loader/symbols.def against the real exports
# of Debian's builds (from ci/fetch-releases.sh): libibverbs, librdmacm, the
# providers' direct-verbs libraries and libibumad. The table must equal
# rdma-core 65.0's exports exactly (name and version node), and every older
# release's exports must be in it. A new rdma-core symbol fails loudly here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: check-symbols.sh RELEASES_DIR}
table=$(mktemp)
trap 'rm -f "$table"' EXIT
prefix() {
  case $1 in
    IBV) echo IBVERBS_1. ;; CM) echo RDMACM_1. ;; MLX5) echo MLX5_1. ;; EFA) echo EFA_1. ;;
    MLX4) echo MLX4_1. ;; HNS) echo HNS_1. ;; MANA) echo MANA_1. ;; IONIC) echo IONIC_1. ;;
    UMAD) echo IBUMAD_1. ;; *) echo "check-symbols: unknown library $1" >&2; exit 1 ;;
  esac
}
sed -n 's/^RDMADL_SYM(\([A-Z0-9]*\), \([0-9.]*\), [A-Z0-9]*, [A-Z]*, [^,]*, \([A-Za-z_0-9]*\), .*/\1 \2 \3/p' \
  "$root/loader/symbols.def" |
  while read -r lib minor name; do echo "$name $(prefix "$lib")$minor"; done | sort >"$table"
rows=$(grep -c '^RDMADL_SYM(' "$root/loader/symbols.def")
[ "$(wc -l <"$table")" -eq "$rows" ] || { echo "check-symbols: cannot read every row of loader/symbols.def" >&2; exit 1; }
status=0
# Every symbol newer than the oldest release tested (33.2, whose exports give
# each library's highest node; a library 33.2 does not ship at all counts as
# newer), and every EMU entry, carries its decision in a comment line right
# above it: "/* NAME: EMU ..." for an EMU entry, "/* NAME: EOPNOTSUPP ..." for
# any other.
oldest=$dir/bullseye/exports.txt
[ -f "$oldest" ] || { echo "check-symbols: no $oldest" >&2; exit 1; }
undecided=$(awk -v oldest="$oldest" '
  BEGIN {
    split("IBV IBVERBS_1. CM RDMACM_1. MLX5 MLX5_1. EFA EFA_1. MLX4 MLX4_1. HNS HNS_1. MANA MANA_1. IONIC IONIC_1. UMAD IBUMAD_1.", p, " ")
    for (i = 1; i < 18; i += 2) { pfx[p[i]] = p[i + 1]; top[p[i]] = -1 }
    while ((getline line < oldest) > 0) {
      split(line, f, " ")
      for (l in pfx)
        if (index(f[2], pfx[l]) == 1 && substr(f[2], length(pfx[l]) + 1) + 0 > top[l])
          top[l] = substr(f[2], length(pfx[l]) + 1) + 0
    }
  }
  /^RDMADL_SYM\(/ {
    split($0, f, ", "); lib = substr(f[1], 12); node = f[2]; impl = f[4]; name = f[6]
    newer = node + 0 > top[lib] || (index(node, ".") && int(node) >= top[lib])
    want = (impl == "EMU") ? "EMU" : "EOPNOTSUPP"
    if ((newer || impl == "EMU") && index(prev, "/* " name ": " want " ") != 1)
      print name " (" impl ", node " pfx[lib] node "): no \"/* " name ": " want " ...\" line above it"
  }
  {prev = $0}' "$root/loader/symbols.def")
if [ -n "$undecided" ]; then
  echo "check-symbols: FAIL: loader/symbols.def entries without their fallback decision:" >&2
  echo "$undecided" | sed 's/^/  /' >&2
  status=1
else
  echo "check-symbols: every symbol newer than 33.2 has its decision (EMU or EOPNOTSUPP) in loader/symbols.def"
fi
for exports in "$dir"/*/exports.txt "$dir"/exports-only/*/exports.txt; do
  suite=$(basename "$(dirname "$exports")")
  version=$(cat "$(dirname "$exports")/version")
  extra=$(comm -13 "$table" <(sort "$exports"))
  if [ -n "$extra" ]; then
    echo "check-symbols: FAIL: $suite ($version) exports symbols missing from loader/symbols.def:" >&2
    echo "$extra" | sed 's/^/  /' >&2
    status=1
  fi
  if [ "$suite" = sid ] && ! cmp -s "$table" <(sort "$exports"); then
    echo "check-symbols: FAIL: loader/symbols.def differs from $suite ($version):" >&2
    diff "$table" <(sort "$exports") | sed 's/^/  /' >&2 || true
    case $version in 65.0-*) ;; *) echo "  (sid moved on from 65.0: update the headers and the table)" >&2 ;; esac
    status=1
  fi
  echo "check-symbols: $suite ($version): $(wc -l <"$exports") exported, all in the table: $([ -z "$extra" ] && echo yes || echo NO)"
done
# librdmadl-ffi's table against the bundled headers' inline functions and
# function-like macros (the same check as the gcc tier's ffi.inlines.coverage).
"$root/tests/ffi/check-inlines.sh" "${CC:-cc}" "$root/third_party/rdma-headers/include" \
  "$root/ffi/inlines.def" || status=1
exit $status
