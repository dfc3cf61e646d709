#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-info.sh: the README's first command. Builds rdmadl (no rdma-core
# needed) and runs rdmadl-info, whose exit status says whether RDMA is usable
# here (0 usable, 1 no library, 2 library but no kernel support or devices).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/ci/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" --target rdmadl-info
exec "$root/build/tools/rdmadl-info" "$@"
