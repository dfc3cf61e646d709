#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-rdma-core.sh VERSION: rdma-core VERSION (28.0, 32.0: the releases
# Debian's archive no longer serves) built from its upstream tag's source in
# third_party/rdma-core-releases/ and installed as a distribution would
# (prefix /usr, multiarch libdir, /etc). Prints the output directory:
#   root/      the installed tree (libraries, providers, rxe.driver, tools)
#   version    VERSION
#   build.log  the configure and build output
# Cached under $RDMADL_CACHE/rdma-core/VERSION-KEY (default ~/.cache/rdmadl),
# KEY = hash of the source archive and of this script: a warm call returns at
# once. Needs cmake, ninja, gcc, pkg-config, libnl-3-dev, libnl-route-3-dev
# and libudev-dev (ci/install-deps.sh). The cold build takes about a minute.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../third_party/rdma-core-releases
ver=${1:?usage: build-rdma-core.sh VERSION}
tarball=$src/rdma-core-$ver.tar.xz
[ -f "$tarball" ] || { echo "build-rdma-core: no $tarball" >&2; exit 1; }
cache=${RDMADL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmadl}/rdma-core
key=$(cat "$tarball" "$0" | sha256sum | cut -c1-16)
out=$cache/$ver-$key
if [ -f "$out/done" ]; then echo "$out"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/build.lock"
flock 9
if [ -f "$out/done" ]; then echo "$out"; exit 0; fi
# The archive must be the one SHA256SUMS names (a truncated checkout, an LFS
# pointer, a local edit): never build something else under this name.
(cd "$src" && grep " rdma-core-$ver.tar.xz\$" SHA256SUMS | sha256sum --quiet -c -) ||
  { echo "build-rdma-core: $tarball does not match SHA256SUMS" >&2; exit 1; }
work=$(mktemp -d "$cache/tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -xJf "$tarball" -C "$work"
s=$work/rdma-core-$ver
echo "build-rdma-core: building rdma-core $ver (log: $out/build.log)" >&2
# No pyverbs (Cython), no man pages (pandoc); the paths Debian's packaging uses.
if ! {
  cmake -S "$s" -B "$s/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNO_PYVERBS=1 -DNO_MAN_PAGES=1 \
    -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu \
    -DCMAKE_INSTALL_SYSCONFDIR=/etc -DCMAKE_INSTALL_RUNDIR=/run -DENABLE_STATIC=0 &&
    ninja -C "$s/build" -j "$(nproc)" &&
    # NO_MAN_PAGES still installs some prebuilt pages the git archive lacks
    # (28.0's libibumad/man): the man directories install nothing.
    find "$s/build" -path '*/man/cmake_install.cmake' -exec sh -c ': >"$1"' sh {} \; &&
    DESTDIR=$work/root cmake --install "$s/build"
} >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  echo "build-rdma-core: rdma-core $ver failed to build" >&2
  exit 1
fi
[ -e "$work/root/usr/lib/x86_64-linux-gnu/libibverbs.so.1" ] ||
  { echo "build-rdma-core: no libibverbs.so.1 in rdma-core $ver's install tree" >&2; exit 1; }
echo "$ver" >"$work/version"
rm -rf "$out.new"; mkdir -p "$out.new"
mv "$work/root" "$work/version" "$work/build.log" "$out.new/"
touch "$out.new/done"
rm -rf "$out"; mv "$out.new" "$out"
# Builds of another key (an older script, another archive) unused for 7 days go.
find "$cache" -mindepth 1 -maxdepth 1 -name "$ver-*" ! -name "$ver-$key" -mtime +7 -exec rm -rf {} + 2>/dev/null || true
echo "$out"
