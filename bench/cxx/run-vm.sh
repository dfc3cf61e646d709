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
  sed 1d "$root/bench/cxx/guest-bench.sh"
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
