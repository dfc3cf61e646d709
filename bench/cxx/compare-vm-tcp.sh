#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/compare-vm-tcp.sh BASE_BUILD_DIR BUILD_DIR [TURNS [ITERS [SIZE]]]:
# two builds' rdmadl-bench-tcp-host between the same two VMs, taking turns in
# one boot (of ci/vm/cluster.sh with two `none` nodes, as run-vm-tcp.sh).
# Each turn runs the base build, then the other, each with --runs 3
# --no-stream ITERS SIZE (both transports, the plain loop and the channel
# alternating within the run). Between these VMs a run's ratio moves by
# 0.1-0.2 from run to run and the host's load moves every figure, so one
# boot of run-vm-tcp.sh cannot tell two builds apart by a few percent; runs
# side by side in one boot can. Prints every "tcp-run:" and "tcp-host:" line
# of node 1, prefixed with "base" or "new", then per build the median of its
# runs' ratios, and the median over turns of the channel's round trip in the
# new build over the base's. Defaults: TURNS 10, ITERS 2000, SIZE 64 (a boot
# takes about 8 minutes). Not a test: it never judges a figure. The
# cluster's log directory is kept at $RDMADL_BENCH_LOG_DIR (default
# /tmp/rdmadl-bench-tcp-compare-DATE).
set -euo pipefail
base=${1:?usage: compare-vm-tcp.sh BASE_BUILD_DIR BUILD_DIR [TURNS [ITERS [SIZE]]]}
build=${2:?usage: compare-vm-tcp.sh BASE_BUILD_DIR BUILD_DIR [TURNS [ITERS [SIZE]]]}
turns=${3:-10} iters=${4:-2000} size=${5:-64} port=19800
logdir=${RDMADL_BENCH_LOG_DIR:-/tmp/rdmadl-bench-tcp-compare-$(date +%Y%m%d-%H%M%S)}
# shellcheck source-path=SCRIPTDIR source=vm-tcp-lib.sh
. "$(dirname "$0")/vm-tcp-lib.sh"
tcp_payload "$build"
ninja -C "$base" -j2 rdmadl-bench-tcp-host >/dev/null
cp "$base/bench/cxx/rdmadl-bench-tcp-host" "$payload/bin/rdmadl-bench-tcp-base"
# busybox ash in the guest; RDMADL_NODE comes from /init. The connecting
# side waits a moment for the listener of each run.
cat >"$payload/guest-tests.sh" <<EOF
#!/bin/sh
export RDMADL_DISABLE=1
port=$port
for turn in \$(seq 1 $turns); do
  for b in base new; do
    port=\$((port + 1))
    bin=rdmadl-bench-tcp-host
    [ \$b = base ] && bin=rdmadl-bench-tcp-base
    if [ "\$RDMADL_NODE" = 0 ]; then
      \$bin --runs 3 --no-stream --listen 192.0.2.10:\$port $iters $size >/dev/null
    else
      sleep 0.5
      \$bin --runs 3 --no-stream --connect 192.0.2.10:\$port $iters $size | sed "s/^/\$b /"
    fi
  done
done
EOF
boot_two_none "$logdir"
grep -hE '^(base|new) tcp-(run|host):' "$logdir"/node1-*.log | tr -d '\r' >"$logdir/runs.txt" || true
cat "$logdir/runs.txt"
# The medians: of each build's per-run ratios, and of new/base channel
# round trips, turn by turn.
awk '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $2 == "tcp-run:" { for (i = 3; i <= NF; i++) if ($i ~ /^rtt=/) r[$1, ++nr[$1]] = substr($i, 5) }
  $2 == "tcp-host:" { for (i = 3; i <= NF; i++) if ($i ~ /^channel=/) { c[$1, ++nc[$1]] = substr($i, 9); break } }
  END {
    for (k = 1; k <= 2; k++) {
      b = k == 1 ? "base" : "new"
      n = 0
      for (i = 1; i <= nr[b]; i++) v[++n] = r[b, i]
      if (n) printf "compare: %s runs=%d median_rtt_ratio=%.3f\n", b, n, median(v, n)
    }
    n = 0
    for (i = 1; i <= nc["new"] && i <= nc["base"]; i++) if (c["base", i] > 0) v[++n] = c["new", i] / c["base", i]
    if (n) printf "compare: turns=%d median_channel_new_over_base=%.3f\n", n, median(v, n)
  }' "$logdir/runs.txt"
exit "$rc"
