#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/phases-vm-tcp.sh BUILD_DIR [ITERS [TURNS]]: where each side's time
# of a 64 B round trip goes between two VMs, plain socket loop against
# channel, phase by phase (bench/cxx/tcp-phases.awk names them). One boot of
# two `none` nodes, as run-vm-tcp.sh; TURNS times (default 3) each node runs
#   rdmadl-bench-tcp-host --no-stream --runs 2 ITERS 64   (ITERS default 2000)
# (both transports in one process, as the bench's own verdict runs them) with
# the guest kernel tracing its system calls, scheduling, frames and
# interrupts; then cuts the bench's round trips into phases. Prints per node
# the bench's tcp-run: lines and, per phase, the median of each turn for the
# plain loop and the channel and the difference of their medians:
#   node N PHASE plain=US,US,.. channel=US,US,.. diff=+US
# Every figure includes the tracing's own cost, alike for both transports.
# Not a test: it never judges a figure. The logs stay in
# $RDMADL_BENCH_LOG_DIR (default /tmp/rdmadl-phases-tcp-vm-DATE).
set -euo pipefail
build=${1:?usage: phases-vm-tcp.sh BUILD_DIR [ITERS [TURNS]]}
iters=${2:-2000} turns=${3:-3}
logdir=${RDMADL_BENCH_LOG_DIR:-/tmp/rdmadl-phases-tcp-vm-$(date +%Y%m%d-%H%M%S)}
# shellcheck source-path=SCRIPTDIR source=vm-tcp-lib.sh
. "$(dirname "$0")/vm-tcp-lib.sh"
tcp_payload "$build"
cp "$root/bench/cxx/tcp-phases.awk" "$payload/bin/"
phases="total send tx sendirq u1 pre wait soft lat post u2 recvnosleep"
# busybox ash in the guest; RDMADL_NODE comes from /init.
cat >"$payload/guest-tests.sh" <<GUEST
#!/bin/sh
export RDMADL_DISABLE=1
T=/sys/kernel/tracing
[ -d \$T/events ] || mount -t tracefs nodev \$T
echo 65536 >\$T/buffer_size_kb
for e in raw_syscalls/sys_enter raw_syscalls/sys_exit sched/sched_switch sched/sched_wakeup \\
  net/net_dev_xmit net/netif_receive_skb irq/irq_handler_entry; do
  echo 1 >\$T/events/\$e/enable
done
if [ "\$RDMADL_NODE" = 0 ]; then side=--listen; else side=--connect; fi
port=19950
for turn in \$(seq 1 $turns); do
  port=\$((port + 1))
  echo >\$T/trace
  echo 1 >\$T/tracing_on
  rdmadl-bench-tcp-host --no-stream --runs 2 \$side 192.0.2.10:\$port $iters 64 >/tmp/out &
  pid=\$!
  wait \$pid
  echo 0 >\$T/tracing_on
  sed -n 's/^tcp-run: /phases-run: /p' /tmp/out
  awk -v T=\$pid -f /payload/bin/tcp-phases.awk \$T/trace >/tmp/cut
  for ph in $phases; do
    for k in p c; do
      grep "^\${k}_\$ph " /tmp/cut | sort -n -k2 |
        awk -v k=\$k -v ph=\$ph -v turn=\$turn '{ v[NR] = \$2 }
          END { if (NR) printf "phase %s %s %s %.1f %d\n", turn, ph, k, v[int((NR + 1) / 2)], NR }'
    done
  done
done
exit 0
GUEST
boot_two_none "$logdir"
for node in 0 1; do
  log=$(ls "$logdir"/node$node-*.log)
  tr -d '\r' <"$log" | grep '^phases-run:' | sed "s/^phases-run: /node $node tcp-run: /" || true
  tr -d '\r' <"$log" | awk -v node="$node" -v order="$phases" '
    $1 == "phase" { v[$3 " " $4] = v[$3 " " $4] (v[$3 " " $4] == "" ? "" : ",") $5
                    m[$3 " " $4, ++n[$3 " " $4]] = $5 }
    function med(key, c, i, j, t, a) {
      c = n[key]
      for (i = 1; i <= c; i++) a[i] = m[key, i]
      for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
    }
    END {
      k = split(order, ph, " ")
      for (i = 1; i <= k; i++) {
        p = ph[i] " p"; c = ph[i] " c"
        if (!n[p] || !n[c]) continue
        printf "node %s %s plain=%s channel=%s diff=%+.1f\n", node, ph[i], v[p], v[c], med(c) - med(p)
      }
    }'
done
exit "$rc"
