#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-symbols.sh RELEASES_DIR: loader/symbols.def against the real exports
# of Debian's builds (from ci/fetch-releases.sh). The table must equal
# rdma-core 65.0's exports exactly (name and version node), and every older
# release's exports must be in it. A new rdma-core symbol fails loudly here.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: check-symbols.sh RELEASES_DIR}
table=$(mktemp)
trap 'rm -f "$table"' EXIT
sed -n 's/^RDMADL_SYM(\([A-Z]*\), \([0-9]*\), [A-Z0-9]*, [A-Z]*, [^,]*, \([A-Za-z_0-9]*\), .*/\1 \2 \3/p' \
  "$root/loader/symbols.def" |
  awk '{print $3, ($1 == "IBV" ? "IBVERBS_1." : "RDMACM_1.") $2}' | sort >"$table"
[ "$(wc -l <"$table")" -eq 169 ] || { echo "check-symbols: table has $(wc -l <"$table") entries, expected 169" >&2; exit 1; }
status=0
# Every symbol newer than the oldest release tested (33.2: IBVERBS_1.11,
# RDMACM_1.3), and every EMU entry, carries its decision in a comment line
# right above it: "/* NAME: EMU ..." for an EMU entry, "/* NAME: EOPNOTSUPP ..."
# for any other.
undecided=$(awk '
  /^RDMADL_SYM\(/ {
    split($0, f, ", "); lib = substr(f[1], 12); minor = f[2] + 0; impl = f[4]; name = f[6]
    newer = (lib == "IBV" && minor > 11) || (lib == "CM" && minor > 3)
    want = (impl == "EMU") ? "EMU" : "EOPNOTSUPP"
    if ((newer || impl == "EMU") && index(prev, "/* " name ": " want " ") != 1)
      print name " (" impl ", node minor " minor "): no \"/* " name ": " want " ...\" line above it"
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
