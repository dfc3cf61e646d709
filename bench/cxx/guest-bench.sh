#!/bin/sh
# SPDX-License-Identifier: MIT
# The guest side of bench/cxx/run-vm.sh (busybox sh): run-vm.sh sets iters,
# lat_size, bw_size and bw_depth above this script's text in the payload's
# guest-tests.sh. Prints one "BENCH <name> ..." line per figure.
# shellcheck disable=SC2154,SC3045 # run-vm.sh sets the sizes; busybox has ulimit -l
ulimit -l unlimited
dev=$RDMADL_TEST_DEVICE gidx=$RDMADL_TEST_GID_INDEX
# perf NAME SIZE ARGS...: server and client of one perftest program on the
# same device; prints the raw output and "BENCH NAME <result row>" (the row
# whose first column is SIZE) or "BENCH NAME missing rc=N".
perf() {
  name=$1 size=$2
  shift 2
  timeout 120 "$@" -d "$dev" -x "$gidx" >/tmp/srv 2>&1 &
  sleep 2
  timeout 120 "$@" -d "$dev" -x "$gidx" 127.0.0.1 >/tmp/cli 2>&1
  rc=$?
  wait
  echo "--- $name: $* (client, rc=$rc)"
  cat /tmp/cli
  echo "--- $name: server"
  cat /tmp/srv
  row=$(grep -E "^ *$size +[0-9]" /tmp/cli | head -1)
  echo "BENCH $name ${row:-missing rc=$rc}"
}
# bench PROGRAM NAME KEY ARGS...: one run of PROGRAM; prints its raw output
# and "BENCH NAME <values after KEY> rc=N" or "BENCH NAME missing rc=N".
bench() {
  prog=$1 name=$2 key=$3
  shift 3
  out=$(timeout 120 "$prog" "$@" 2>&1)
  rc=$?
  echo "--- $name: $prog $* (rc=$rc)"
  echo "$out"
  v=$(echo "$out" | sed -n "s/^$key //p" | head -1)
  echo "BENCH $name ${v:-missing} rc=$rc"
}
cxx() { bench rdmadl-bench-cxx "$@"; }
chan() { bench rdmadl-bench-channel "$@"; }
perf perftest-lat "$lat_size" ib_send_lat -F -n "$iters" -s "$lat_size" -I 0
cxx cxx-lat lat_us lat "$iters" "$lat_size"
perf perftest-bw "$bw_size" ib_write_bw -F -n "$iters" -s "$bw_size" -t "$bw_depth" -Q 1
cxx cxx-bw bw_gbps bw "$iters" "$bw_size"
for round in 1 2; do
  if [ $round = 1 ]; then order="qp ch"; else order="ch qp"; fi
  for v in $order; do chan chan-lat-$v-$round lat_us lat $v "$iters" "$lat_size"; done
  for v in $order; do chan chan-bw-$v-$round bw_gbps bw $v "$iters" "$bw_size"; done
done
if [ -d /payload/valgrind ]; then
  export VALGRIND_LIB=/payload/valgrind
  for p in cxx c; do
    for n in 1000 3000; do
      timeout 300 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$p.$n \
        rdmadl-bench-postpoll-$p $n >/tmp/cg.out 2>/tmp/cg.log
      rc=$?
      echo "--- callgrind rdmadl-bench-postpoll-$p $n (rc=$rc)"
      cat /tmp/cg.out
      tail -5 /tmp/cg.log
      ir=$(sed -n -E 's/^(summary|totals): *([0-9]+).*/\2/p' /tmp/cg.$p.$n 2>/dev/null | head -1)
      polls=$(sed -n 's/^iters [0-9]* polls \([0-9]*\)$/\1/p' /tmp/cg.out)
      [ "$rc" = 0 ] || ir=
      echo "BENCH callgrind-$p-$n ${ir:-missing} polls=${polls:-missing} rc=$rc"
    done
  done
else
  echo "BENCH callgrind skipped: no valgrind on the host"
fi
exit 0
