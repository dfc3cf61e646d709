#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/run-vm-tcp.sh BUILD_DIR [ITERS [RUNS [SIZE]]]: rdmadl-bench-tcp-host
# between two VMs: one boot of ci/vm/cluster.sh with two `none` nodes (no
# rdma-core: the TCP channel alone, as on a node without RDMA) on one virtual
# Ethernet segment. Node 0 listens (--listen 192.0.2.10:PORT: it echoes and
# receives), node 1 connects and measures, so the plain socket loop and the
# channel cross the same virtual NIC. Prints node 1's "tcp-run:" and
# "tcp-host:" lines (bench/README.md reads them). Defaults: ITERS 1500,
# RUNS 4 (--runs: even, as the runs take turns at which transport goes
# first), every size (SIZE: only that one, e.g. 64 with more ITERS than the
# larger sizes can take in a VM's time). ITERS is also the streams' length:
# at 500 a 64 KiB stream lasted under 2 s and its ratio spread 0.72-0.97
# between boots, at 1500 0.83-0.95 (bench/README.md, 2026-11-29, midday); a
# boot of every size at 1500 takes about 11 minutes. Not a
# test: it never judges a figure. The cluster's log directory is kept at
# $RDMADL_BENCH_LOG_DIR (default /tmp/rdmadl-bench-tcp-vm-DATE).
set -euo pipefail
build=${1:?usage: run-vm-tcp.sh BUILD_DIR [ITERS [RUNS [SIZE]]]}
iters=${2:-1500} runs=${3:-4} size=${4:-} port=19700
logdir=${RDMADL_BENCH_LOG_DIR:-/tmp/rdmadl-bench-tcp-vm-$(date +%Y%m%d-%H%M%S)}
. "$(dirname "$0")/vm-tcp-lib.sh"
tcp_payload "$build"
# busybox ash in the guest; RDMADL_NODE and RDMADL_NODE_IP come from /init.
cat >"$payload/guest-tests.sh" <<EOF
#!/bin/sh
export RDMADL_DISABLE=1
if [ "\$RDMADL_NODE" = 0 ]; then
  rdmadl-bench-tcp-host --runs $runs --listen 192.0.2.10:$port $iters $size
else
  rdmadl-bench-tcp-host --runs $runs --connect 192.0.2.10:$port $iters $size
fi
EOF
boot_two_none "$logdir"
grep -hE '^tcp-(run|host):' "$logdir"/node1-*.log | tr -d '\r' || true
grep -h 'rdmadl-bench-tcp-host:' "$logdir"/node*.log || true
exit $rc
