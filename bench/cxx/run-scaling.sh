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
#
# bench/cxx/run-scaling.sh BUILD_DIR --vm [SUITE]: instead, the set-up on
# Soft-RoCE: boots the VM of SUITE (default bookworm, ci/vm/run.sh) once and
# runs rdmadl-bench-scaling natively on rxe0 for N = 1, 8, 32, three times
# each: "setup" (out of band: multi_channel::create + local_endpoints +
# handshake, each QP connected to itself) and "cm" (rdma_cm: a
# multi_channel::create_cm accepting N channel::create_cm of the same
# process, each with its own queue pair, PD and CQ, so 2N queue pairs where
# "setup" has N). Prints "BENCH setup-MODE-N NS" lines (the least of three
# runs) and a table of microseconds per peer; the VM log goes to
# $RDMADL_BENCH_LOG (default /tmp/rdmadl-bench-scaling-DATE.log).
# shellcheck disable=SC2034 # the per-N arrays are read through a nameref
set -euo pipefail
build=${1:?usage: run-scaling.sh BUILD_DIR [--vm [SUITE]]}
bin=$build/bench/cxx
nic=$bin/fake_nic/libibverbs.so.1
prog=$bin/rdmadl-bench-scaling
if [ "${2:-}" = --vm ]; then
  suite=${3:-bookworm}
  root=$(cd "$(dirname "$0")/../.." && pwd)
  log=${RDMADL_BENCH_LOG:-/tmp/rdmadl-bench-scaling-$(date +%Y%m%d-%H%M%S).log}
  [ -x "$prog" ] || { echo "run-scaling: $prog missing (build the bench targets)" >&2; exit 1; }
  payload=$(mktemp -d)
  trap 'rm -rf "$payload"' EXIT
  mkdir "$payload/bin"
  cp "$prog" "$payload/bin/"
  cat >"$payload/guest-tests.sh" <<'GUEST'
#!/bin/sh
ulimit -l unlimited
rc_all=0
for n in 1 8 32; do
  for m in setup cm; do
    best=''
    for r in 1 2 3; do
      out=$(timeout 300 /payload/bin/rdmadl-bench-scaling "$n" "$m" 0 2>&1)
      rc=$?
      echo "--- rdmadl-bench-scaling $n $m 0, run $r (rc=$rc)"
      echo "$out"
      ns=$(echo "$out" | sed -n 's/^ns //p' | head -1)
      if [ $rc = 0 ] && [ -n "$ns" ]; then
        if [ -z "$best" ] || [ "$ns" -lt "$best" ]; then best=$ns; fi
      else
        rc_all=1
      fi
    done
    echo "BENCH setup-$m-$n ${best:-missing}"
  done
done
exit $rc_all
GUEST
  echo "host: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$log"
  set +e
  "$root/ci/vm/run.sh" --suite "$suite" --payload "$payload" --timeout 900 | tr -d '\r' >>"$log"
  vm_rc=${PIPESTATUS[0]}
  set -e
  echo "host: load after: $(cut -d' ' -f1-3 /proc/loadavg); VM exit $vm_rc; log $log" | tee -a "$log"
  grep '^BENCH' "$log" || true
  echo "Soft-RoCE ($suite, rxe0) set-up per peer, least of 3 runs:"
  printf '%5s %16s %15s\n' N oob-us/peer rdma_cm-us/peer
  grep '^BENCH setup-' "$log" | awk '
    { split($2, k, "-"); v[k[2], k[3]] = $3; ns[k[3]] = 1 }
    function us(x, n) { return x ~ /^[0-9]+$/ ? sprintf("%.1f", x / 1000 / n) : "missing" }
    END { for (n = 1; n <= 32; n++) if (n in ns)
            printf "%5d %16s %15s\n", n, us(v["setup", n], n), us(v["cm", n], n) }'
  exit "$vm_rc"
fi
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
