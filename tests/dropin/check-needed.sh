#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-needed.sh BINARY: fails if BINARY has a NEEDED entry for libibverbs or
# librdmacm (a drop-in program must start without rdma-core installed).
set -euo pipefail
needed=$(readelf -d "$1" | awk '/\(NEEDED\)/ {print $NF}')
echo "$1 NEEDED: $(echo $needed)"
if echo "$needed" | grep -Eq 'libibverbs|librdmacm'; then
  echo "FAIL: $1 needs rdma-core at start-up" >&2
  exit 1
fi
readelf -d "$1" | grep -q '(NEEDED)' || { echo "FAIL: no dynamic section read" >&2; exit 1; }
