#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/run-scaling.sh BUILD_DIR: how a multi_channel's costs grow with
# its peers, N = 1, 8, 64, 512, on this host's fake NIC (the one run-host.sh
# uses: tests/fakes/fake_provider*.c with FAKEPROV_MINIMAL_OPS, here also
# MAX_CQE=0 and MAX_QP=4096 so that 512 peers fit), no RDMA needed. Under
# callgrind, with rdmadl-bench-scaling (read its header for the modes):
#   setup/peer    instructions of multi_channel::create + local_endpoints +
#                 handshake, over those of opening the context alone, / N,
#                 without the fake provider's own (callgrind_calls_into.py:
#                 its checks walk a list of all its objects, O(N) a call);
#                 fake/peer is those, for the record
#   heap/peer     heap bytes the set-up took (run natively, mallinfo2), / N;
#                 "c++" is rdmadl's own part (the fake provider's queues,
#                 in C, are the rest)
#   scatter/part  instructions per part of a scatter_write of N parts (one per
#                 peer, every part's outcome returned); gather/part the same
#                 for gather_read
#   scope/req     per request of a polling scope of N post_writes (one per
#                 peer) awaited by the scope's end: post, completion, slot
#   qp/part       the raw API: N queue_pair::post_write, then polls of the
#                 shared CQ until N completions are in
# Then the same figures as wall time, from native runs of the same build
# (for the record only: a shared host's timings vary; nothing checks them).
# Each per-part figure is (instructions at I2 iterations - at I1) / ((I2 - I1)
# * N), so start-up and set-up cancel. The last line is "flat: yes" when
# scatter, gather and scope per part, set-up per peer and c++ heap per peer
# at N = 512 are all within 1.1x of N = 8, else "flat: no (...)" naming
# them, and the exit status is 1.
# shellcheck disable=SC2034 # the per-N arrays are read through a nameref
set -euo pipefail
build=${1:?usage: run-scaling.sh BUILD_DIR}
bin=$build/bench/cxx
nic=$bin/fake_nic/libibverbs.so.1
prog=$bin/rdmadl-bench-scaling
command -v valgrind >/dev/null || { echo "run-scaling: valgrind is not installed" >&2; exit 1; }
for f in "$nic" "$prog"; do
  [ -e "$f" ] || { echo "run-scaling: $f missing (build the bench targets)" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export RDMADL_IBVERBS_PATH=$nic RDMADL_RDMACM_PATH=$tmp/none/librdmacm.so.1 \
  FAKEPROV_KNOBS=MINIMAL_OPS=1,CQ_EX=2,QP_EX=2,MAX_QP_WR=1024,MAX_CQE=0,MAX_QP=4096

# instructions N MODE ITERS: total instructions of one run.
instructions() {
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$prog" "$1" "$2" "$3" \
    >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/out" "$tmp/err" >&2; exit 1; }
  grep -qx "iters $3 ok" "$tmp/out" || { cat "$tmp/out" "$tmp/err" >&2; exit 1; }
  sed -n 's/^summary: //p' "$tmp/cg.out"
}
# split N MODE: "TOTAL FAKE" of one run (FAKE: the calls into the fake NIC).
split() {
  instructions "$1" "$2" 0 >/dev/null
  python3 "$here/callgrind_calls_into.py" fake_nic/libibverbs.so.1 "$tmp/cg.out"
}
# per_part N MODE: instructions per part, to one decimal (in tenths).
per_part() {
  local d=$((16384 / $1 < 16 ? 16 : 16384 / $1)) lo hi
  lo=$(instructions "$1" "$2" 2)
  hi=$(instructions "$1" "$2" $((2 + d)))
  echo $(((10 * (hi - lo) + d * $1 / 2) / (d * $1)))
}
tenths() { printf '%d.%d' $(($1 / 10)) $(($1 % 10)); }
# wall N MODE ITERS: the least of three native runs' "ns" (set-up, or the loop).
wall() {
  local best='' t _
  for _ in 1 2 3; do
    "$prog" "$1" "$2" "$3" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/out" "$tmp/err" >&2; exit 1; }
    t=$(sed -n 's/^ns //p' "$tmp/out")
    [ -z "$best" ] || [ "$t" -lt "$best" ] && best=$t
  done
  echo "$best"
}
# wall_part N MODE: nanoseconds per part, to one decimal (in tenths).
wall_part() {
  local it=$((262144 / $1)) ns
  ns=$(wall "$1" "$2" "$it")
  echo $(((10 * ns + it * $1 / 2) / (it * $1)))
}

read -r base base_fake < <(split 1 base)
printf '%5s %11s %10s %10s %10s %13s %12s %10s %8s\n' N setup/peer fake/peer heap/peer \
  c++/peer scatter/part gather/part scope/req qp/part
declare -A sc ga so su cx
for n in 1 8 64 512; do
  read -r all fake < <(split "$n" setup)
  fake=$((fake - base_fake))
  setup=$(((all - base - fake + n / 2) / n))
  read -r _ _ heap cxx < <("$prog" "$n" heap 0)
  su[$n]=$((10 * setup)) cx[$n]=$((10 * ((cxx + n / 2) / n)))
  sc[$n]=$(per_part "$n" scatter)
  ga[$n]=$(per_part "$n" gather)
  so[$n]=$(per_part "$n" scope)
  qp=$(per_part "$n" qp)
  printf '%5d %11d %10d %10d %10d %13s %12s %10s %8s\n' "$n" "$setup" $(((fake + n / 2) / n)) \
    $(((heap + n / 2) / n)) $(((cxx + n / 2) / n)) "$(tenths "${sc[$n]}")" \
    "$(tenths "${ga[$n]}")" "$(tenths "${so[$n]}")" "$(tenths "$qp")"
done
# Flat: per part at N = 512 no more than 1.1x N = 8 (integer tenths: 10 * a <= 11 * b).
bad=
for k in scatter:sc gather:ga scope:so setup:su c++heap:cx; do
  declare -n m=${k#*:}
  ((10 * m[512] <= 11 * m[8])) || bad+=" ${k%%:*} $(tenths "${m[512]}")/$(tenths "${m[8]}")"
  unset -n m
done
echo "wall time on this host, natively (least of 3 runs; set-up includes the fake's own work):"
printf '%5s %14s %13s %12s %10s %8s\n' N setup-us/peer scatter-ns/part gather-ns/part \
  scope-ns/req qp-ns/part
for n in 1 8 64 512; do
  su_ns=$(wall "$n" setup 0)
  printf '%5d %14s %15s %14s %12s %10s\n' "$n" "$(tenths $(((su_ns + 50 * n) / (100 * n))))" \
    "$(tenths "$(wall_part "$n" scatter)")" "$(tenths "$(wall_part "$n" gather)")" \
    "$(tenths "$(wall_part "$n" scope)")" "$(tenths "$(wall_part "$n" qp)")"
done
if [ -z "$bad" ]; then
  echo "flat: yes (per part and per peer, N=512 within 1.1x of N=8)"
else
  echo "flat: no (N=512 over 1.1x N=8:$bad)"
  exit 1
fi
