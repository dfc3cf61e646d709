#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# release-exports.sh LIBDIR: the public symbols of LIBDIR's libibverbs.so.1,
# librdmacm.so.1 and, where the release has them, the providers' direct-verbs
# libraries and libibumad.so.3, as "name node" lines, the way rdmadl binds
# them: each name at its default (@@) node; a name with only non-default
# entries (e.g. ibv_register_driver@IBVERBS_1.1) at the highest of those,
# unless that is the old IBVERBS_1.0 ABI. IBVERBS_PRIVATE_* and the
# version-node symbols themselves are left out.
set -euo pipefail
for lib in "$1/libibverbs.so.1" "$1/librdmacm.so.1" "$1/libmlx5.so.1" "$1/libefa.so.1" \
  "$1/libmlx4.so.1" "$1/libhns.so.1" "$1/libmana.so.1" "$1/libionic.so.1" "$1/libibumad.so.3"; do
  case $lib in
    */libibverbs.so.1 | */librdmacm.so.1) [ -e "$lib" ] || { echo "release-exports: no $lib" >&2; exit 1; } ;;
    *) [ -e "$lib" ] || continue ;;
  esac
  readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") {print $8}'
done | awk -F'@' '
  $1 ~ /^[A-Z][A-Z0-9]*_[0-9][0-9.]*$/ { next }
  $NF ~ /PRIVATE/ { next }
  /@@/ { def[$1] = $NF; next }
  NF == 2 { if (!($1 in other) || ($2 > other[$1])) other[$1] = $2 }
  END {
    for (n in def) print n, def[n]
    for (n in other) if (!(n in def) && other[n] != "IBVERBS_1.0") print n, other[n]
  }' | sort
