#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/trace-vm-tcp.sh BUILD_DIR [ITERS [SIZE [MODE]]]: where the time of
# a TCP round trip (MODE round-trips, the default) or of a streamed message
# (MODE stream) goes between two VMs, plain socket loop against channel. One
# boot of ci/vm/cluster.sh with two `none` nodes, as run-vm-tcp.sh; in it each
# transport runs twice, alternating, that phase only:
#   rdmadl-bench-tcp-host --only plain|channel --no-stream|--no-round-trips
#                         --phase-stats ITERS SIZE
# with the guest kernel counting, per run, the system calls of each thread of
# the bench (a hist trigger on raw_syscalls:sys_enter keyed by thread and call;
# the threads are named from /proc a second into the run), the frames each
# node sent and received (net_dev_xmit, netif_receive_skb), and the node's
# interrupts per virtio queue, context switches and CPU ticks by kind (user,
# system, idle, irq, softirq; over the whole process). Prints, per node,
# the bench's "tcp-phase:" lines (wall and CPU time per round trip or message,
# of the application thread and of the others: the channel's progress thread)
# and "tcp-sock:" lines (each connection's TCP state after the phase), and
# every call a thread made at least 0.05 times per round trip or message (the
# kernel's counts include the warm-up, counted in: ITERS/10 round trips, at
# least 2, or with MODE stream 2 round trips and a window's stream).
# Defaults: ITERS 300, SIZE 65536. Not a test: it never judges a figure. The
# logs stay in $RDMADL_BENCH_LOG_DIR (default /tmp/rdmadl-trace-tcp-vm-DATE).
set -euo pipefail
build=${1:?usage: trace-vm-tcp.sh BUILD_DIR [ITERS [SIZE [round-trips|stream]]]}
iters=${2:-300} size=${3:-65536} mode=${4:-round-trips}
case $mode in
round-trips) phase=--no-stream ;;
stream) phase=--no-round-trips ;;
*) echo "trace-vm-tcp.sh: MODE is round-trips or stream" >&2; exit 2 ;;
esac
logdir=${RDMADL_BENCH_LOG_DIR:-/tmp/rdmadl-trace-tcp-vm-$(date +%Y%m%d-%H%M%S)}
. "$(dirname "$0")/vm-tcp-lib.sh"
tcp_payload "$build"
# busybox ash in the guest; RDMADL_NODE comes from /init.
cat >"$payload/guest-tests.sh" <<GUEST
#!/bin/sh
export RDMADL_DISABLE=1
T=/sys/kernel/tracing
[ -d \$T/events ] || mount -t tracefs nodev \$T
calls='hist:keys=common_pid,id:vals=hitcount:size=4096'
frames='hist:keys=len.log2:vals=hitcount'
port=19800
# The node's interrupts per virtio queue, context switches, and CPU time by
# kind (USER_HZ ticks: user, system, idle, irq, softirq), one "NAME VALUE" each.
counters() {
  awk '/virtio/ { n = 0; for (i = 2; i <= NF && \$i ~ /^[0-9]+\$/; i++) n += \$i; print "irq:" \$NF, n }' \\
    /proc/interrupts
  awk '\$1 == "ctxt" { print "switches", \$2 }
       \$1 == "cpu" { print "cpu-user", \$2 + \$3; print "cpu-system", \$4; print "cpu-idle", \$5 + \$6
                     print "cpu-irq", \$7; print "cpu-softirq", \$8 }' /proc/stat
}
for t in plain channel plain channel; do
  port=\$((port + 1))
  echo "\$calls" >\$T/events/raw_syscalls/sys_enter/trigger
  echo "\$frames" >\$T/events/net/net_dev_xmit/trigger
  echo "\$frames" >\$T/events/net/netif_receive_skb/trigger
  if [ "\$RDMADL_NODE" = 0 ]; then side=--listen; else side=--connect; fi
  counters >/tmp/before
  rdmadl-bench-tcp-host --only \$t $phase --phase-stats --runs 1 \$side \\
    192.0.2.10:\$port $iters $size &
  pid=\$!
  sleep 1 # its threads (the channel's progress thread) are up by now
  for task in /proc/\$pid/task/*; do echo "thread \$port \${task##*/} \$(cat \$task/comm)"; done
  wait \$pid
  counters >/tmp/after
  awk -v t=\$t 'NR == FNR { was[\$1] = \$2; next } { print "counter", t, \$1, \$2 - was[\$1] }' \\
    /tmp/before /tmp/after
  grep 'common_pid' \$T/events/raw_syscalls/sys_enter/hist | sed "s/^/calls \$t \$port /"
  for e in net_dev_xmit netif_receive_skb; do
    grep -o 'Hits: [0-9]*' \$T/events/net/\$e/hist | sed "s/^/frames \$t \$e /"
    echo "!\$frames" >\$T/events/net/\$e/trigger
  done
  echo "!\$calls" >\$T/events/raw_syscalls/sys_enter/trigger
done
exit 0
GUEST
boot_two_none "$logdir"
# Round trips or messages per run, as the bench counts them (tcp_host.cpp:
# 1 MiB takes ITERS/10, at least 20; a stream has max(ITERS, 4 windows,
# 8 MiB), a window being 1 MiB's worth, 4 to 4096), and the warm-up's, which the
# kernel's counts include (the tcp-phase lines do not).
n=$iters
[ "$size" -ge 1048576 ] && n=$((iters / 10 > 20 ? iters / 10 : 20))
if [ "$mode" = stream ]; then
  window=$((1048576 / size)); window=$((window < 4 ? 4 : window > 4096 ? 4096 : window))
  trips=$((n > 4 * window ? n : 4 * window))
  floor=$(((8388608 + size - 1) / size)); trips=$((trips > floor ? trips : floor))
  trips=$((trips + window))
else
  trips=$((n + (n / 10 > 2 ? n / 10 : 2)))
fi
for node in 0 1; do
  log=$(ls "$logdir"/node$node-*.log)
  echo "node $node ($([ $node = 0 ] && echo echoes || echo measures)):"
  tr -d '\r' <"$log" | grep -E '^tcp-(phase|sock):' | sed 's/^/  /'
  tr -d '\r' <"$log" | awk -v trips="$trips" -v unit="$([ "$mode" = stream ] && echo message || echo 'round trip')" '
    BEGIN {
      k = split("0 read 1 write 7 poll 23 select 24 sched_yield 44 sendto 45 recvfrom " \
                "46 sendmsg 47 recvmsg 54 setsockopt 202 futex 232 epoll_wait 262 newfstatat " \
                "270 pselect6 271 ppoll 286 timerfd_settime 287 timerfd_gettime", m, " ")
      for (i = 1; i < k; i += 2) name[m[i]] = m[i + 1]
    }
    $1 == "thread" { comm[$2 " " $3] = $4 }
    $1 == "calls" {
      t = $2; run = $3; line = $0; gsub(/[{},:]/, " ", line); n = split(line, f, " ")
      pid = ""; id = ""; hits = 0
      for (i = 1; i <= n; i++) {
        if (f[i] == "common_pid") pid = f[i + 1]
        if (f[i] == "id") id = f[i + 1]
        if (f[i] == "hitcount") hits = f[i + 1]
      }
      if (!((run " " pid) in comm)) next
      key = t " " comm[run " " pid] " " (id in name ? name[id] : "nr" id)
      count[key] += hits
    }
    $1 == "frames" { frames[$2 " " $3] += $5 }
    $1 == "counter" { counter[$2 " " $3] += $4 }
    END {
      for (c in count) if (count[c] / (2 * trips) >= 0.05)
        printf "  calls per %s: %s %.2f\n", unit, c, count[c] / (2 * trips)
      for (c in frames) printf "  frames per %s: %s %.1f\n", unit, c, frames[c] / (2 * trips)
      for (c in counter)
        printf "  node per %s: %s %.3f%s\n", unit, c, counter[c] / (2 * trips),
               c ~ /cpu-/ ? " ticks" : ""
    }' | sort
done
exit $rc
