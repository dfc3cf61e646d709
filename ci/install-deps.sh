#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install-deps.sh [--vm] [--deb]: the Debian packages rdmadl's build and tests need.
# doxygen and groff-base: the reference manual and man page (ci/build-docs.sh).
# libnl-3-dev, libnl-route-3-dev and libudev-dev (pkg-config is pkgconf's):
# rdma-core 28.0 and 32.0 built from source (ci/build-rdma-core.sh), for the
# symbols tier, the host tests and the VM tier's rc28/rc32 suites.
# Installs only what is missing (as root); otherwise says what to install.
set -euo pipefail
want=(cmake ninja-build g++ gcc clang libclang-rt-dev binutils python3 pkgconf doxygen groff-base
  libnl-3-dev libnl-route-3-dev libudev-dev)
# --vm: QEMU and busybox for the images; make, patch and libpci-dev (a
# configure requirement of perftest 25.x) to build Debian's perftest against
# the link aliases (ci/build-perftest.sh).
# --deb: what ci/build-deb.sh needs to build and check the Debian packages
# (build-essential and debian/control's Build-Depends beyond the above, and lintian).
for arg in "$@"; do
  case $arg in
    --vm) want+=(qemu-system-x86 busybox-static make patch libpci-dev) ;;
    --deb) want+=(build-essential debhelper dpkg-dev lintian) ;;
    *) echo "usage: install-deps.sh [--vm] [--deb]" >&2; exit 2 ;;
  esac
done
missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: please install: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
