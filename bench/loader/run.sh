#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/loader/run.sh BUILD_DIR [RUNS]: start-up and per-call cost of rdmadl's
# drop-in library vs the same programs linked directly with rdma-core 44.0,
# in the same run. Prints a table with ratios (rdmadl / direct).
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [RUNS]}
runs=${2:-300}
bin=$build/bench/loader
rel=$(sed -n 's/^RDMADL_RELEASES_DIR:PATH=//p' "$build/CMakeCache.txt")
lib=$rel/bookworm/lib
export LD_LIBRARY_PATH=$lib
# rdmadl finds the same release through the default soname search.
time_runs() { # BINARY -> mean microseconds per process
  local start end
  start=$(date +%s%N)
  for ((i = 0; i < runs; i++)); do "$1"; done
  end=$(date +%s%N)
  echo $(((end - start) / runs / 1000))
}
# Warm the page cache, then alternate to share any drift.
"$bin/bench_startup_rdmadl"; "$bin/bench_startup_direct"
r1=$(time_runs "$bin/bench_startup_rdmadl"); d1=$(time_runs "$bin/bench_startup_direct")
r2=$(time_runs "$bin/bench_startup_rdmadl"); d2=$(time_runs "$bin/bench_startup_direct")
r=$(((r1 + r2) / 2)) d=$(((d1 + d2) / 2))
pr=$("$bin/bench_percall_rdmadl") pd=$("$bin/bench_percall_direct")
echo "rdma-core: $(cat "$rel/bookworm/version") ($lib)"
printf '%-34s %12s %12s %8s\n' "measure" "rdmadl" "direct" "ratio"
printf '%-34s %9d us %9d us %8.2f\n' "process start-up ($runs runs x2)" "$r" "$d" "$(echo "$r / $d" | bc -l)"
printf '%-34s %9.2f ns %9.2f ns %8.2f\n' "ibv_wc_status_str per call" "$pr" "$pd" "$(echo "$pr / $pd" | bc -l)"
