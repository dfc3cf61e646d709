#!/bin/sh
# SPDX-License-Identifier: MIT
# check-dlopen-only.sh PROGRAM: PROGRAM reaches RDMA only through dlopen/dlsym:
# it neither defines nor references an ibv_*/rdma_*/verbs_* symbol (so no
# verbs.h inline function was compiled into it) and needs no rdma or rdmadl
# library.
set -eu
prog=$1
[ -r "$prog" ] || { echo "check-dlopen-only: cannot read $prog" >&2; exit 2; }
syms=$(nm -a "$prog" | awk '{print $NF}' | grep -E '^(ibv_|rdma_|verbs_|__ibv|___ibv)' || true)
needed=$(readelf -dW "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E 'ibverbs|rdmacm|rdmadl' || true)
if [ -n "$syms$needed" ]; then
  echo "check-dlopen-only: $prog is not dlopen-only:"
  echo "$syms $needed" | tr ' ' '\n' | sed '/^$/d; s/^/  /'
  exit 1
fi
echo "check-dlopen-only: $prog: no ibv_*/rdma_* symbol, no rdma NEEDED"
