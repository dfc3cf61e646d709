#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-headers.sh BUILD_DIR: proves the build read rdma-core's headers only
# from third_party/rdma-headers, never from /usr/include (ninja's recorded
# dependencies of every object).
set -euo pipefail
deps=$(ninja -C "$1" -t deps)
bundled=$(echo "$deps" | grep -c 'third_party/rdma-headers/include/infiniband/verbs.h' || true)
system=$(echo "$deps" | grep -E '^ +/usr/(local/)?include/(infiniband|rdma)/' | sort -u || true)
if [ -n "$system" ]; then
  echo "check-headers: FAIL: system RDMA headers used:" >&2
  echo "$system" >&2
  exit 1
fi
[ "$bundled" -gt 0 ] || { echo "check-headers: FAIL: no object read the bundled verbs.h" >&2; exit 1; }
# The direct-verbs and libibumad headers the table declares come from the
# bundled set too.
for h in mlx5dv.h efadv.h mlx4dv.h hnsdv.h manadv.h ionic_dv.h umad.h umad_str.h; do
  grep -q "third_party/rdma-headers/include/infiniband/$h" <<<"$deps" ||
    { echo "check-headers: FAIL: no object read the bundled $h" >&2; exit 1; }
done
echo "check-headers: $bundled objects read the bundled verbs.h (and the direct-verbs and umad headers), none read /usr/include/{infiniband,rdma}"
