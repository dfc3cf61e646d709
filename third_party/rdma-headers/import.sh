#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Re-imports the bundled RDMA headers from Debian's packages at the versions
# pinned in VERSION: rdma-core's public headers (libibverbs-dev, librdmacm-dev,
# libibumad-dev) and the kernel RDMA UAPI headers they include (linux-libc-dev's rdma/*.h).
# Usage: third_party/rdma-headers/import.sh [--latest]
#   --latest  take the suite's current versions and rewrite VERSION
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fetch=$here/../../ci/lib/debfetch.sh
# shellcheck source=/dev/null
. "$here/VERSION"
pin() { if [ "${1:-}" = --latest ]; then echo "$2"; else echo "$2=$3"; fi; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$fetch" "$SUITE" "$work/debs" \
  "$(pin "${1:-}" libibverbs-dev "$RDMA_CORE_DEB")" \
  "$(pin "${1:-}" librdmacm-dev "$RDMA_CORE_DEB")" \
  "$(pin "${1:-}" libibumad-dev "$RDMA_CORE_DEB")" \
  "$(pin "${1:-}" linux-libc-dev "$LINUX_LIBC_DEV_DEB")" >/dev/null
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
inc=$work/root/usr/include
rm -rf "$here/include" "$here/licenses"
mkdir -p "$here/include/infiniband" "$here/include/rdma" "$here/licenses"
cp "$inc"/infiniband/*.h "$here/include/infiniband/"
# rdma-core's rdma_cm headers, then every kernel RDMA UAPI header (rdma/*.h,
# rdma/hfi/*.h); the two sets do not overlap.
cp "$inc"/rdma/rdma_cma.h "$inc"/rdma/rdma_cma_abi.h "$inc"/rdma/rdma_verbs.h \
   "$inc"/rdma/rsocket.h "$here/include/rdma/"
dpkg-deb -c "$work"/debs/linux-libc-dev_*.deb >"$work/uapi.list"
for f in "$inc"/rdma/*.h; do
  case "$(basename "$f")" in rdma_cma.h|rdma_cma_abi.h|rdma_verbs.h|rsocket.h) continue ;; esac
  grep -q "/usr/include/rdma/$(basename "$f")\$" "$work/uapi.list" ||
    { echo "import: $f is not from linux-libc-dev" >&2; exit 1; }
  cp "$f" "$here/include/rdma/"
done
mkdir -p "$here/include/rdma/hfi" && cp "$inc"/rdma/hfi/*.h "$here/include/rdma/hfi/"
cp "$work/root/usr/share/doc/libibverbs-dev/copyright" "$here/licenses/rdma-core.copyright"
cp "$work/root/usr/share/doc/linux-libc-dev/copyright" "$here/licenses/linux-libc-dev.copyright"
if [ "${1:-}" = --latest ]; then
  ver() { dpkg-deb -f "$(ls "$work"/debs/"$1"_*.deb)" Version; }
  cat >"$here/VERSION" <<EOV
# Bundled headers: Debian $SUITE packages (read by import.sh and CMake).
SUITE=$SUITE
RDMA_CORE=$(ver libibverbs-dev | sed 's/-.*//')
RDMA_CORE_DEB=$(ver libibverbs-dev)
LINUX_LIBC_DEV_DEB=$(ver linux-libc-dev)
EOV
fi
echo "imported rdma-core $(dpkg-deb -f "$work"/debs/libibverbs-dev_*.deb Version) headers into $here/include"
