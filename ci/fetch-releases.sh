#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fetch-releases.sh OUTDIR: Debian's rdma-core runtime of each suite, for the
# tier-2 tests (real library, no devices) and the symbol check.
#   OUTDIR/<suite>/lib/          libibverbs.so.1, librdmacm.so.1, the providers'
#                                direct-verbs libraries (libmlx5.so.1, ...;
#                                ibverbs-providers), libibumad.so.3 and libnl
#   OUTDIR/<suite>/exports.txt   their public symbols (ci/release-exports.sh)
# bullseye (33.2) and bookworm (44.0) run on this host's glibc and become
# tier-2 tests; trixie (56.1) and sid (65.0) need glibc 2.38, so only their
# exports are kept (under OUTDIR/exports-only/) and their code runs in the
# Soft-RoCE VM tier.
# rc28 and rc32: rdma-core 28.0 and 32.0, which Debian no longer serves, built
# from their upstream source on this host (ci/build-rdma-core.sh, cached):
# they run here, so they are tier-2 tests too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: fetch-releases.sh OUTDIR}
mkdir -p "$out"
# The two source builds (CPU: about a minute cold) run in the background while
# the Debian packages download (network); their messages are printed after.
srclog=$(mktemp)
trap 'rm -f "$srclog"' EXIT
("$here/build-rdma-core.sh" 28.0 && "$here/build-rdma-core.sh" 32.0) >/dev/null 2>"$srclog" &
srcpid=$!
for suite in bullseye bookworm trixie sid; do
  case $suite in
    bullseye|bookworm) cm=librdmacm1; dest=$out/$suite ;;
    *) cm=librdmacm1t64; dest=$out/exports-only/$suite ;;
  esac
  work=$(mktemp -d)
  "$here/lib/debfetch.sh" "$suite" "$work/debs" libibverbs1 "$cm" ibverbs-providers libibumad3 \
    libnl-3-200 libnl-route-3-200 >/dev/null
  for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
  rm -rf "$dest" && mkdir -p "$dest/lib"
  # Older suites keep some of these in /lib, newer ones in /usr/lib.
  find "$work/root" \( -name 'libibverbs.so.*' -o -name 'librdmacm.so.*' -o -name 'libnl-3.so.*' \
    -o -name 'libnl-route-3.so.*' -o -name 'libmlx5.so.*' -o -name 'libefa.so.*' \
    -o -name 'libmlx4.so.*' -o -name 'libhns.so.*' -o -name 'libmana.so.*' -o -name 'libionic.so.*' \
    -o -name 'libibumad.so.*' \) -exec cp -a {} "$dest/lib/" \;
  "$here/release-exports.sh" "$dest/lib" >"$dest/exports.txt"
  dpkg-deb -f "$(ls "$work"/debs/libibverbs1_*.deb)" Version >"$dest/version"
  echo "fetch-releases: $suite rdma-core $(cat "$dest/version"): $(wc -l <"$dest/exports.txt") symbols"
  rm -rf "$work"
done
srcst=0
wait "$srcpid" || srcst=$?
cat "$srclog" >&2
[ "$srcst" = 0 ] || { echo "fetch-releases: ci/build-rdma-core.sh failed" >&2; exit 1; }
for v in 28.0 32.0; do
  dest=$out/rc${v%.0}
  built=$("$here/build-rdma-core.sh" "$v")
  rm -rf "$dest" && mkdir -p "$dest/lib"
  find "$built/root/usr/lib/x86_64-linux-gnu" -maxdepth 1 \( -name 'libibverbs.so.*' -o -name 'librdmacm.so.*' \
    -o -name 'libmlx5.so.*' -o -name 'libefa.so.*' -o -name 'libmlx4.so.*' -o -name 'libhns.so.*' \
    -o -name 'libmana.so.*' -o -name 'libionic.so.*' -o -name 'libibumad.so.*' \) -exec cp -a {} "$dest/lib/" \;
  "$here/release-exports.sh" "$dest/lib" >"$dest/exports.txt"
  cp "$built/version" "$dest/version"
  echo "fetch-releases: rc${v%.0} rdma-core $v (built from source): $(wc -l <"$dest/exports.txt") symbols"
done
