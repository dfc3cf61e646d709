#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/run-host.sh BUILD_DIR: instructions per post+poll (a signaled
# 8-byte RDMA write and the poll that takes its completion) on this host, no
# RDMA needed: the programs load the tests' fake provider
# (tests/fakes/fake_provider*.c, built as bench/cxx/fake_nic/libibverbs.so.1)
# through RDMADL_IBVERBS_PATH, with FAKEPROV_MINIMAL_OPS: its data path does
# almost nothing, so the counts are the caller's side. Its extended CQ and QP
# ops are off (the plain ibv_post_send/ibv_poll_cq path) and it reports 1024
# work requests per queue. Each variant runs under callgrind with 1000
# and 11000 iterations; (difference) / 10000 cancels start-up and set-up.
#   cxx           queue_pair::post_write() + completion_queue::poll()
#   cxx_prepared  one send_request built before the loop, queue_pair::post()
#   c_fair        hand-written C filling its ibv_send_wr on every post
#   c_prebuilt    hand-written C posting one ibv_send_wr built before the loop
# Then the channel layer against the raw queue_pair API, the same way, with
# rdmadl-bench-channel-host (its receives complete at once on the fake NIC):
#   write      one awaited 8-byte RDMA write (channel::write vs post_write+poll)
#   sendrecv   a receive and a send, both awaited (send_receive vs post+poll)
#   scatter3   one write to each of three peers, all awaited (scatter_write
#              without per-part outcomes, as the raw loop keeps none, vs three
#              post_write + polls)
# and, against the same raw figures, the general forms:
#   scope2     sendrecv through a polling scope (two posts, two waits)
#   scatter3r  scatter3 with every part's outcome (results)
# The last two lines are "postpoll-host: cxx=N cxx_prepared=N c_fair=N
# c_prebuilt=N" and "channel-host: write=CH/QP sendrecv=CH/QP scatter3=CH/QP
# scope2=CH/QP scatter3r=CH/QP" (instructions per operation, channel /
# queue_pair).
set -euo pipefail
build=${1:?usage: run-host.sh BUILD_DIR}
bin=$build/bench/cxx
nic=$bin/fake_nic/libibverbs.so.1
command -v valgrind >/dev/null || { echo "run-host: valgrind is not installed" >&2; exit 1; }
for f in "$nic" "$bin/rdmadl-bench-postpoll-cxx" "$bin/rdmadl-bench-postpoll-c" \
  "$bin/rdmadl-bench-channel-host"; do
  [ -e "$f" ] || { echo "run-host: $f missing (build the bench targets)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# instructions PROGRAM ITERS MODE: total instructions of one run.
instructions() {
  RDMADL_IBVERBS_PATH=$nic RDMADL_RDMACM_PATH=$tmp/none/librdmacm.so.1 \
    FAKEPROV_KNOBS=MINIMAL_OPS=1,CQ_EX=2,QP_EX=2,MAX_QP_WR=1024 \
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$1" "$2" "$3" \
    >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  grep -qE "^iters $2 (polls $2|ok)\$" "$tmp/out" || { cat "$tmp/out" "$tmp/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$tmp/cg.out"
}
per_iter() { # PROGRAM MODE
  local lo hi
  lo=$(instructions "$1" 1000 "$2")
  hi=$(instructions "$1" 11000 "$2")
  echo $(((hi - lo + 5000) / 10000))
}
cxx=$(per_iter "$bin/rdmadl-bench-postpoll-cxx" post)
prep=$(per_iter "$bin/rdmadl-bench-postpoll-cxx" prepared)
fair=$(per_iter "$bin/rdmadl-bench-postpoll-c" fair)
pre=$(per_iter "$bin/rdmadl-bench-postpoll-c" prebuilt)
echo "postpoll-host: cxx=$cxx cxx_prepared=$prep c_fair=$fair c_prebuilt=$pre"
line="channel-host:"
declare -A raw
for op in write sendrecv scatter3; do
  ch=$(per_iter "$bin/rdmadl-bench-channel-host" "ch-$op")
  raw[$op]=$(per_iter "$bin/rdmadl-bench-channel-host" "qp-$op")
  line+=" $op=$ch/${raw[$op]}"
done
line+=" scope2=$(per_iter "$bin/rdmadl-bench-channel-host" ch-scope2)/${raw[sendrecv]}"
line+=" scatter3r=$(per_iter "$bin/rdmadl-bench-channel-host" ch-scatter3r)/${raw[scatter3]}"
echo "$line"
