#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/run-vm.sh BUILD_DIR [SUITE]: boots the Soft-RoCE VM of SUITE
# (default bookworm) once and, in that boot, runs perftest's ib_send_lat and
# ib_write_bw and rdmadl's C++ equivalents (same device, RC, message size and
# iteration count), then callgrind on the post+poll loops (C++ API vs
# hand-written C verbs) when the host has valgrind, and the channel layer
# against the raw queue_pair API (rdmadl-bench-channel: the same ping-pong
# and write-bandwidth loops both ways, run twice in alternating order).
# Prints the figures and their ratios. Not a test: it never judges a figure.
#
# Every figure is one self-contained line "BENCH <name> <value|missing> ..."
# (a failed step still prints its line, with its exit status); the raw output
# of each step is in the VM log, kept at $RDMADL_BENCH_LOG (default
# /tmp/rdmadl-bench-cxx-DATE.log).
set -euo pipefail
build=${1:?usage: run-vm.sh BUILD_DIR [SUITE]}
suite=${2:-bookworm}
root=$(cd "$(dirname "$0")/../.." && pwd)
log=${RDMADL_BENCH_LOG:-/tmp/rdmadl-bench-cxx-$(date +%Y%m%d-%H%M%S).log}
iters=5000 lat_size=2 bw_size=65536 bw_depth=128
ninja -C "$build" -j2 bench/all >/dev/null
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
mkdir -p "$payload/bin"
cp "$build"/bench/cxx/rdmadl-bench-{cxx,postpoll-cxx,postpoll-c,channel} "$payload/bin/"
if [ -x /usr/bin/valgrind ] && [ -d /usr/libexec/valgrind ]; then
  # Only what callgrind needs: all of /usr/libexec/valgrind (48 MB) overflows
  # the guest's RAM while the initramfs unpacks. /usr/bin/valgrind is
  # Debian's wrapper script around valgrind.bin.
  cp /usr/bin/valgrind.bin "$payload/bin/valgrind"
  mkdir "$payload/valgrind"
  cp /usr/libexec/valgrind/{callgrind-amd64-linux,vgpreload_core-amd64-linux.so,default.supp} \
    "$payload/valgrind/"
fi
{
  echo "#!/bin/sh"
  echo "iters=$iters lat_size=$lat_size bw_size=$bw_size bw_depth=$bw_depth"
  cat <<'EOS'
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
EOS
} >"$payload/guest-tests.sh"
echo "host: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$log"
set +e
"$root/ci/vm/run.sh" --suite "$suite" --payload "$payload" --timeout 900 | tr -d '\r' >>"$log"
vm_rc=${PIPESTATUS[0]}
set -e
echo "host: load after: $(cut -d' ' -f1-3 /proc/loadavg); VM exit $vm_rc; log $log" | tee -a "$log"
grep -E '^RDMADL-GUEST-START|^BENCH' "$log" || true
# Columns (after "BENCH name"): ib_send_lat: #bytes #iterations t_min t_max
# t_typical t_avg t_stdev 99% 99.9% [usec]; ib_write_bw: #bytes #iterations
# BW-peak BW-average [MiB/sec: perftest divides by 2^20] MsgRate[Mpps].
# (--report_gbits would print only two decimals of ~0.25 Gb/s.)
grep '^BENCH' "$log" | awk -v size_l="$lat_size" -v size_b="$bw_size" '
  function num(x) { return x ~ /^[0-9]+(\.[0-9]+)?$/ }
  function show(x, f) { return num(x) ? sprintf(f, x) : "missing" }
  $2 == "perftest-lat" && $3 == size_l && num($8) { lat = $8; typ = $7 }
  $2 == "perftest-bw" && $3 == size_b && num($6) { bw = $6 * 1048576 * 8 / 1e9 }
  $2 == "cxx-lat" && num($3) && num($4) { clat = $3; ctyp = $4 }
  $2 == "cxx-bw" && num($3) { cbw = $3 }
  $2 ~ /^callgrind-/ && num($3) { ir[$2] = $3; split($4, p, "="); polls[$2] = p[2] }
  $2 ~ /^chan-lat-/ && num($3) && num($4) { split($2, k, "-"); cl[k[3]] += $3; cm[k[3]] += $4; cn[k[3]]++ }
  $2 ~ /^chan-bw-/ && num($3) { split($2, k, "-"); cb[k[3]] += $3; cbn[k[3]]++ }
  function per(k1, k3) { return (ir[k3] - ir[k1]) / 2000 }
  function ppi(k1, k3) { return (num(polls[k3]) && num(polls[k1])) ? sprintf("%.2f", (polls[k3] - polls[k1]) / 2000) : "missing" }
  END {
    printf "latency, half round trip, average: perftest %s us, C++ API %s us, ratio %s\n",
      show(lat, "%.2f"), show(clat, "%.2f"), (lat && clat) ? sprintf("%.2f", clat / lat) : "missing"
    printf "latency, half round trip, median:  perftest %s us, C++ API %s us, ratio %s\n",
      show(typ, "%.2f"), show(ctyp, "%.2f"), (typ && ctyp) ? sprintf("%.2f", ctyp / typ) : "missing"
    printf "RDMA write bw: perftest %s Gb/s, C++ API %s Gb/s, ratio %s\n",
      show(bw, "%.3f"), show(cbw, "%.3f"), (bw && cbw) ? sprintf("%.2f", cbw / bw) : "missing"
    lq = cn["qp"] ? cl["qp"] / cn["qp"] : 0; lc = cn["ch"] ? cl["ch"] / cn["ch"] : 0
    mq = cn["qp"] ? cm["qp"] / cn["qp"] : 0; mc = cn["ch"] ? cm["ch"] / cn["ch"] : 0
    bq = cbn["qp"] ? cb["qp"] / cbn["qp"] : 0; bc = cbn["ch"] ? cb["ch"] / cbn["ch"] : 0
    printf "channel ping-pong, half round trip, average (mean of %d runs each): queue_pair %s us, channel %s us, ratio %s\n",
      cn["ch"], lq ? sprintf("%.2f", lq) : "missing", lc ? sprintf("%.2f", lc) : "missing", (lq && lc) ? sprintf("%.2f", lc / lq) : "missing"
    printf "channel ping-pong, half round trip, median:  queue_pair %s us, channel %s us, ratio %s\n",
      mq ? sprintf("%.2f", mq) : "missing", mc ? sprintf("%.2f", mc) : "missing", (mq && mc) ? sprintf("%.2f", mc / mq) : "missing"
    printf "channel write bw (batches of 128): queue_pair %s Gb/s, channel %s Gb/s, ratio %s\n",
      bq ? sprintf("%.3f", bq) : "missing", bc ? sprintf("%.3f", bc) : "missing", (bq && bc) ? sprintf("%.2f", bc / bq) : "missing"
    c = ("callgrind-cxx-1000" in ir) && ("callgrind-cxx-3000" in ir)
    h = ("callgrind-c-1000" in ir) && ("callgrind-c-3000" in ir)
    printf "instructions per post+poll: C++ API %s (polls/iter %s), C verbs %s (polls/iter %s), ratio %s\n",
      c ? sprintf("%.0f", per("callgrind-cxx-1000", "callgrind-cxx-3000")) : "missing",
      c ? ppi("callgrind-cxx-1000", "callgrind-cxx-3000") : "missing",
      h ? sprintf("%.0f", per("callgrind-c-1000", "callgrind-c-3000")) : "missing",
      h ? ppi("callgrind-c-1000", "callgrind-c-3000") : "missing",
      (c && h) ? sprintf("%.2f", per("callgrind-cxx-1000", "callgrind-cxx-3000") / per("callgrind-c-1000", "callgrind-c-3000")) : "missing"
  }' | tee -a "$log"
exit "$vm_rc"
