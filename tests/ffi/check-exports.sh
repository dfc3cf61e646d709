#!/bin/sh
# SPDX-License-Identifier: MIT
# check-exports.sh LIST SHARED STATIC: the functions librdmadl-ffi exports,
# read with readelf from the built shared library (.dynsym: defined, global,
# default visibility) and from the static archive (every member's defined,
# global, default-visibility functions), must each equal LIST (the generated
# rdmadl-ffi.symbols). Prints the differences and exits 1 when they differ.
set -eu
list=$1 so=$2 ar=$3
for f in "$list" "$so" "$ar"; do
  [ -r "$f" ] || { echo "check-exports: cannot read $f" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LC_ALL=C sort -u "$list" >"$tmp/want"
# Columns: Num Value Size Type Bind Vis Ndx Name
readelf --dyn-syms -W "$so" |
  awk '$4 == "FUNC" && ($5 == "GLOBAL" || $5 == "WEAK") && $6 == "DEFAULT" && $7 != "UND" {print $8}' |
  sed 's/@.*//' | LC_ALL=C sort -u >"$tmp/so"
readelf -s -W "$ar" |
  awk '$4 == "FUNC" && ($5 == "GLOBAL" || $5 == "WEAK") && $6 == "DEFAULT" && $7 != "UND" {print $8}' |
  LC_ALL=C sort -u >"$tmp/ar"
status=0
for kind in so ar; do
  if cmp -s "$tmp/want" "$tmp/$kind"; then
    echo "check-exports: $kind: $(wc -l <"$tmp/$kind") functions, equal to the table"
  else
    echo "check-exports: $kind: differs from the table (< table only, > library only):"
    diff "$tmp/want" "$tmp/$kind" | grep '^[<>]' | sed 's/^/  /' || true
    status=1
  fi
done
exit $status
