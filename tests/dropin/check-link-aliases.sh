#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-link-aliases.sh ALIAS_DIR HEADERS CC [FLAGS]: builds
# tests/dropin/link_aliases.c the two ways an unmodified build system would
# against rdmadl's link-alias directory (cmake/RdmadlLinkAliases.cmake):
#   (1) CPPFLAGS=-I<HEADERS> LDFLAGS=-L<ALIAS_DIR> -libverbs -lrdmacm -lmlx5 -libumad
#   (2) PKG_CONFIG_PATH=<ALIAS_DIR> pkg-config --cflags --libs libibverbs
#       librdmacm libmlx5 libibumad
# Each binary's only RDMA NEEDED must be librdmadl-verbs.so.0 (none on
# rdma-core's libraries), and run with RDMADL_DISABLE=1 each call must fail
# cleanly with EOPNOTSUPP. Prints "link aliases: ok" at the end.
set -euo pipefail
dir=${1:?usage: check-link-aliases.sh ALIAS_DIR HEADERS CC [FLAGS]}
headers=${2:?} cc=${3:?} flags=${4:-}
src=$(cd "$(dirname "$0")" && pwd)/link_aliases.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "link aliases: FAIL: $*" >&2; exit 1; }

for l in libibverbs librdmacm libmlx5 libmlx4 libefa libhns libmana libionic libibumad; do
  [ -e "$dir/$l.so" ] || fail "$dir/$l.so missing (or dangling)"
  [ -f "$dir/$l.pc" ] || fail "$dir/$l.pc missing"
done
[ -e "$dir/librdmadl-verbs.so.0" ] || fail "$dir/librdmadl-verbs.so.0 missing (for -rpath-link)"
# The directory holding the real librdmadl-verbs.so.0, for running the programs.
libdir=$(dirname "$(readlink -f "$dir/libibverbs.so")")

# shellcheck disable=SC2086 # FLAGS and pkg-config's output are word lists
"$cc" $flags -I"$headers" -o "$tmp/by_flags" "$src" -L"$dir" -libverbs -lrdmacm -lmlx5 -libumad ||
  fail "build with -L$dir -libverbs -lrdmacm -lmlx5 -libumad failed"
pc=$(PKG_CONFIG_PATH=$dir pkg-config --cflags --libs libibverbs librdmacm libmlx5 libibumad) ||
  fail "pkg-config found no rdma-core module in $dir"
echo "pkg-config: $pc"
# shellcheck disable=SC2086
"$cc" $flags -o "$tmp/by_pkgconfig" "$src" $pc || fail "build with pkg-config's flags failed"

for exe in by_flags by_pkgconfig; do
  needed=$(readelf -d "$tmp/$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "$exe NEEDED: $needed"
  case " $needed " in
    *libibverbs* | *librdmacm* | *libibumad* | *libmlx[45]* | *libefa* | *libhns* | *libmana* | *libionic*)
      fail "$exe needs rdma-core: $needed" ;;
  esac
  case " $needed " in *" librdmadl-verbs.so.0 "*) ;; *) fail "$exe does not need librdmadl-verbs.so.0" ;; esac
  out=$(RDMADL_DISABLE=1 LD_LIBRARY_PATH=$libdir "$tmp/$exe") || fail "$exe with RDMADL_DISABLE=1: $out"
  echo "$out"
  grep -qx 'link-aliases: clean' <<<"$out" || fail "$exe: not clean"
done
echo "link aliases: ok"
