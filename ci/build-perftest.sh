#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-perftest.sh BUILD_DIR: builds Debian's perftest, unmodified, with its
# own ./configure against rdmadl's link aliases (cmake/RdmadlLinkAliases.cmake)
# in BUILD_DIR, and prints the directory holding its ib_* programs (bin/) and
# the non-glibc libraries they need besides the drop-in (lib/).
#
#   ./configure CPPFLAGS=-I<bundled rdma-core headers> LDFLAGS=-L<BUILD_DIR>/rdmadl/rdma-core
#
# so its own checks find -libverbs -lrdmacm -libumad -lmlx5 -lefa -lhns: the
# build fails unless configure reports each found (libibumad is required
# anyway; mlx5dv, efadv and hnsdv turn features on) and config.h has
# HAVE_MLX5DV, HAVE_SRD and HAVE_HNSDV, unless a program NEEDs any rdma-core
# library, or unless one does not NEED librdmadl-verbs.so.0.
#
# The source is the source package of $RDMADL_PERFTEST_SUITE (default trixie:
# 25.01.0, the one the archive serves in full that builds with bookworm's gcc
# 12; the programs need only bookworm's glibc), fetched by ci/lib/debfetch.sh
# --source and built from its shipped configure (no autoreconf). BUILD_DIR's
# librdmadl-verbs.so.0 must be built. Cached under
# $RDMADL_CACHE/perftest/VERSION-KEY, KEY hashing this script, the drop-in's
# version script (what it exports) and the bundled headers' version: a warm
# run takes well under a second, a cold one about a minute on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:?usage: build-perftest.sh BUILD_DIR}" && pwd)
suite=${RDMADL_PERFTEST_SUITE:-trixie}
cache=${RDMADL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmadl}
aliases=$build/rdmadl/rdma-core
headers=$root/third_party/rdma-headers/include
map=$build/gen/rdmadl-verbs.map

die() { echo "build-perftest: $*" >&2; exit 1; }
[ -e "$aliases/libibverbs.so" ] || die "$aliases/libibverbs.so missing: build rdmadl_verbs in $build first"
[ -f "$map" ] || die "$map missing (not an rdmadl build?)"

ver=$("$root/ci/lib/debfetch.sh" --source-version "$suite" perftest)
[ -n "$ver" ] || die "no perftest source package in $suite"
key=$(cat "$0" "$map" "$root/third_party/rdma-headers/VERSION" | sha256sum | cut -c1-12)
out=$cache/perftest/$ver-$key
if [ -f "$out/done" ]; then echo "$out"; exit 0; fi

mkdir -p "$cache/perftest"
work=$(mktemp -d "$cache/perftest/tmp.XXXXXX")
failed=$out.failed # the logs of a failed build, kept
finish() {
  if [ ! -f "$out/done" ] && [ -d "$work/out" ]; then rm -rf "$failed"; mv "$work/out" "$failed"; fi
  rm -rf "$work"
}
trap finish EXIT
src=$("$root/ci/lib/debfetch.sh" --source "$suite" "$work" "perftest=$ver")
mkdir -p "$work/out/bin"
cd "$src"
# shellcheck disable=SC2016 # the line as a reader would type it
echo "./configure CPPFLAGS=-I$headers LDFLAGS=-L$aliases" >"$work/out/configure.line"
if ! ./configure CPPFLAGS="-I$headers" LDFLAGS="-L$aliases" >"$work/out/configure.log" 2>&1; then
  tail -n 20 "$work/out/configure.log" >&2
  cp config.log "$work/out/" 2>/dev/null || true
  die "perftest $ver: configure failed against $aliases (logs: $failed)"
fi
cp config.h config.log "$work/out/"
for found in 'umad_init in -libumad' 'mlx5dv_create_qp in -lmlx5' 'efadv_create_qp_ex in -lefa' \
  'hnsdv_query_device in -lhns'; do
  grep -q "^checking for $found\.\.\. yes$" "$work/out/configure.log" ||
    die "perftest $ver: configure did not find $found against the aliases (logs: $failed)"
done
for def in HAVE_LIBIBVERBS HAVE_LIBRDMACM HAVE_MLX5DV HAVE_SRD HAVE_HNSDV; do
  grep -q "^#define $def 1$" config.h || die "perftest $ver: config.h lacks $def"
done
if ! make -j2 >"$work/out/make.log" 2>&1; then
  tail -n 30 "$work/out/make.log" >&2
  die "perftest $ver: make failed (logs: $failed)"
fi
# The shipped configure and Makefile.in were used as they are.
! grep -Eq '(^|/| )(aclocal|automake|autoconf|autoheader)( |$)' "$work/out/make.log" ||
  die "perftest $ver: make re-ran the autotools (timestamps?)"

progs=$(find . -maxdepth 1 -type f -name 'ib_*' -perm -u+x -printf '%f\n' | sort)
[ -n "$progs" ] || die "perftest $ver: no ib_* program built"
for p in $progs; do
  needed=$(readelf -d "$p" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "$p: $needed" >>"$work/out/needed"
  case " $needed " in
    *libibverbs* | *librdmacm* | *libibumad* | *libmlx[45]* | *libefa* | *libhns* | *libmana* | *libionic*)
      die "perftest $ver: $p needs rdma-core: $needed" ;;
  esac
  case " $needed " in *" librdmadl-verbs.so.0 "*) ;; *) die "perftest $ver: $p does not need librdmadl-verbs.so.0" ;; esac
  cp "$p" "$work/out/bin/"
done
# Its other libraries (libpci and what that needs), the build host's, go
# beside the programs in lib/: bullseye's libpci (3.7) lacks
# pci_fill_info@LIBPCI_3.8 and the image without rdma-core has none. glibc's
# own libraries stay the guest's (every guest has bookworm's or newer).
mkdir -p "$work/out/lib"
(cd "$work/out/bin" && LD_LIBRARY_PATH=$build ldd ./*) |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r so path; do
  case $so in
    libc.so.* | libm.so.* | ld-linux* | libpthread.so.* | libdl.so.* | librt.so.* | librdmadl-verbs.so.*) ;;
    *) cp -L "$path" "$work/out/lib/$so" ;;
  esac
done
grep '^#define HAVE_' config.h | awk '{print $2}' | tr '\n' ' ' >"$work/out/features"
echo "$ver" >"$work/out/version"
touch "$work/out/done"
rm -rf "$out" "$failed"
mv "$work/out" "$out"
echo "$out"
