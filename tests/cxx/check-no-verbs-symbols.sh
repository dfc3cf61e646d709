#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: check-no-verbs-symbols.sh NM FILE...
# Fails when any object in FILE (archives or objects) defines or references an
# ibv_* / rdma_* symbol: rdmadl must reach verbs only through the loader's
# hidden rdmadl_sym_* stubs, and must not interpose anything in a host process.
set -eu
nm=$1
shift
[ $# -gt 0 ] || { echo "usage: $0 NM FILE..." >&2; exit 2; }
out=$("$nm" -A "$@") || { echo "nm failed" >&2; exit 2; }
[ -n "$out" ] || { echo "nm listed no symbols: wrong file?" >&2; exit 2; }
echo "$out" | grep -q 'rdmadl_sym_' || { echo "no rdmadl_sym_ reference: wrong file?" >&2; exit 2; }
bad=$(echo "$out" | awk '{print $NF}' | grep -E '^_?(ibv|rdma)_' || true)
if [ -n "$bad" ]; then
  echo "rdmadl's objects define or reference verbs names:" >&2
  echo "$out" | grep -E ' _?(ibv|rdma)_' >&2
  exit 1
fi
echo "ok: no ibv_*/rdma_* symbol in $*"
