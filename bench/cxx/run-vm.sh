#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/cxx/run-vm.sh BUILD_DIR [SUITE]: boots the Soft-RoCE VM of SUITE
# (default bookworm) once and, in that boot, runs perftest's ib_send_lat and
# ib_write_bw and rdmadl's C++ equivalents, then callgrind on the post+poll
# loops (C++ API vs hand-written C verbs) when the host has valgrind. Prints
# the figures and their ratios. Not a test.
set -euo pipefail
build=${1:?usage: run-vm.sh BUILD_DIR [SUITE]}
suite=${2:-bookworm}
root=$(cd "$(dirname "$0")/../.." && pwd)
ninja -C "$build" -j2 bench/all >/dev/null
payload=$(mktemp -d)
trap 'rm -rf "$payload"' EXIT
mkdir -p "$payload/bin" "$payload/lib"
cp "$build"/bench/cxx/rdmadl-bench-{cxx,postpoll-cxx,postpoll-c} "$payload/bin/"
if [ -x /usr/bin/valgrind ] && [ -d /usr/libexec/valgrind ]; then
  cp /usr/bin/valgrind "$payload/bin/"
  cp -r /usr/libexec/valgrind "$payload/valgrind"
fi
cat >"$payload/guest-tests.sh" <<'EOS'
#!/bin/sh
ulimit -l unlimited
dev=$RDMADL_TEST_DEVICE gidx=$RDMADL_TEST_GID_INDEX
perf() { # server and client of one perftest program on the same device
  timeout 120 "$@" -d "$dev" -x "$gidx" >/tmp/srv 2>&1 &
  sleep 1
  timeout 120 "$@" -d "$dev" -x "$gidx" 127.0.0.1 >/tmp/cli 2>&1
  wait
  cat /tmp/cli
}
echo "BENCH perftest-lat"; perf ib_send_lat -F -n 5000 -s 2 | grep -E '^ *2 ' | head -1
echo "BENCH perftest-bw"; perf ib_write_bw -F -n 5000 -s 65536 | grep -E '^ *65536 ' | head -1
echo "BENCH cxx-lat $(timeout 120 rdmadl-bench-cxx lat 5000)"
echo "BENCH cxx-bw $(timeout 120 rdmadl-bench-cxx bw 5000 65536)"
if [ -d /payload/valgrind ]; then
  export VALGRIND_LIB=/payload/valgrind
  for p in cxx c; do
    for n in 1000 3000; do
      timeout 300 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$p.$n \
        rdmadl-bench-postpoll-$p $n >/tmp/cg.log 2>&1
      echo "BENCH callgrind-$p-$n $(grep -E '^summary:|^totals:' /tmp/cg.$p.$n | head -1)"
    done
  done
fi
exit 0
EOS
"$root/ci/vm/run.sh" --suite "$suite" --payload "$payload" --timeout 900 | tr -d '\r' | grep '^BENCH' |
  tee /tmp/rdmadl-bench-cxx.txt
awk '
  /perftest-lat/ { getline; lat = $6 }           # t_avg column of ib_send_lat
  /perftest-bw/  { getline; bw = $4 }            # BW average [MB/sec]
  /cxx-lat/ { clat = $4 }
  /cxx-bw/  { cbw = $4 }
  /callgrind-cxx-1000/ { c1 = $4 } /callgrind-cxx-3000/ { c3 = $4 }
  /callgrind-c-1000/ { h1 = $4 } /callgrind-c-3000/ { h3 = $4 }
  END {
    if (lat && clat) printf "latency: perftest %.2f us, C++ API %.2f us, ratio %.2f\n", lat, clat, clat / lat
    if (bw && cbw) printf "write bw: perftest %.3f Gb/s, C++ API %.3f Gb/s, ratio %.2f\n", bw * 8 / 1000, cbw, cbw / (bw * 8 / 1000)
    if (c3 && h3) printf "instructions per post+poll: C++ API %.0f, C verbs %.0f, ratio %.2f\n", (c3 - c1) / 2000, (h3 - h1) / 2000, (c3 - c1) / (h3 - h1)
  }' /tmp/rdmadl-bench-cxx.txt
