#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/loader/run.sh BUILD_DIR [RUNS]: whole-process start-up of test 1
# (ibv_get_device_list once) and test 2 (plus rdma_create_event_channel),
# each linked directly with rdma-core 44.0, with rdmadl's .a and .so.0, and
# with a minimal NCCL-style loader; and the no-stack case against an empty
# main(). Wall time: RUNS runs of each, interleaved, median (p25-p75) in us.
# Instructions: callgrind's total for the whole process (ld.so included).
# Ratios are against direct link (tests 1, 2) and the empty main (no stack).
# No stack: as root, the programs and the empty main() run in
# hide-rdma-core.sh's namespace, where glibc's search for libibverbs.so.1
# fails as on a machine without rdma-core ("absent=real"); otherwise
# RDMADL_IBVERBS_PATH names a file that does not exist, a stat instead of the
# failed search, in the empty main()'s environment too ("absent=override").
# Then the verdict against issue 20's targets, on instructions (exact and
# repeatable; the wall times on a shared host are not): test 1 and test 2
# <= 1.05x direct and no-stack <= 1.05x the empty main, for both drop-ins.
# It prints, it never fails: a benchmark, not a test.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [RUNS]}
runs=${2:-400}
bin=$build/bench/loader
rel=$(sed -n "s/^RDMADL_RELEASES_DIR:[A-Z]*=//p" "$build/CMakeCache.txt")
lib=$rel/bookworm/lib
# Every variant finds the same 44.0 libraries; rdmadl and the NCCL-style
# loader by soname search, as in a real installation.
export LD_LIBRARY_PATH=$lib
unset RDMADL_IBVERBS_PATH RDMADL_RDMACM_PATH RDMADL_DISABLE RDMADL_DEBUG
specs=()
for t in 1 2; do
  for v in direct a so nccl; do specs+=("t$t.$v=$bin/bench_t${t}_$v"); done
done
# No stack, and the empty main() it is measured against, in one environment.
hide=$(dirname "$0")/hide-rdma-core.sh
if "$hide" true 2>/dev/null; then
  absent=real nostack= in_absent=("$hide")
else
  absent=override nostack=,RDMADL_IBVERBS_PATH=/nonexistent/libibverbs.so.1 in_absent=()
fi
nospecs=("empty=$bin/bench_empty$nostack" "nostack.a=$bin/bench_t2_a$nostack"
         "nostack.so=$bin/bench_t2_so$nostack")
# The floor's dlopen by soname fails only where the libraries are hidden.
[ $absent = real ] && nospecs+=("floor=$bin/bench_floor")
wall=$("$bin/bench_runner" "$runs" "${specs[@]}")
wall+=$'\n'$("${in_absent[@]}" "$bin/bench_runner" "$runs" "${nospecs[@]}")

instr() { # LABEL=BINARY[,VAR=VALUE] [PREFIX...] -> callgrind's instruction total
  local spec=${1#*=} binary env=()
  shift
  IFS=, read -r binary rest <<<"$spec"
  [ -n "${rest:-}" ] && env=("$rest")
  "$@" env "${env[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$binary" 2>&1 |
    sed -n 's/.*Collected : //p'
}
declare -A ir
for s in "${specs[@]}"; do ir[${s%%=*}]=$(instr "$s"); done
for s in "${nospecs[@]}"; do ir[${s%%=*}]=$(instr "$s" "${in_absent[@]}"); done

echo "rdma-core $(cat "$rel/bookworm/version") ($lib), $runs runs each, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| start-up | wall median us (p25-p75) | wall ratio | instructions | instr. ratio |"
echo "|---|---|---|---|---|"
echo "$wall" | while read -r label med p25 p75; do
  case $label in
  t1.*) base=t1.direct ;;
  t2.*) base=t2.direct ;;
  *) base=empty ;;
  esac
  bmed=$(echo "$wall" | awk -v b="$base" '$1 == b {print $2}')
  printf '| %s | %.0f (%.0f-%.0f) | %.3f | %s | %.3f |\n' "$label" "$med" "$p25" "$p75" \
    "$(echo "$med / $bmed" | bc -l)" "${ir[$label]}" "$(echo "${ir[$label]} / ${ir[$base]}" | bc -l)"
done
echo
printf '| per call, ibv_rate_to_mult | ns |\n|---|---|\n'
for v in direct a so; do printf '| %s | %s |\n' "$v" "$("$bin/bench_percall_$v")"; done

target=1.05
echo
echo "| target: instructions <= ${target}x | ratio | verdict |"
echo "|---|---|---|"
missed=0
summary=
for pair in t1.a:t1.direct t1.so:t1.direct t2.a:t2.direct t2.so:t2.direct \
            nostack.a:empty nostack.so:empty; do
  label=${pair%%:*} base=${pair#*:}
  ratio=$(echo "scale=3; ${ir[$label]} / ${ir[$base]}" | bc -l)
  if [ "$(echo "$ratio <= $target" | bc -l)" = 1 ]; then
    verdict=met
  else
    verdict="missed by $(echo "scale=1; (${ir[$label]} - ${ir[$base]} * $target) / 1000" | bc -l) k"
    missed=$((missed + 1))
  fi
  printf '| %s vs %s | %.3f | %s |\n' "$label" "$base" "$ratio" "$verdict"
  summary="$summary $label=$ratio"
done
# What the no-stack case costs beyond the floor of its design (bench_floor:
# one failed dlopen, its reason kept, errno kept): not a target, a measure.
for label in nostack.a nostack.so; do
  [ $absent = real ] || break
  printf '| %s vs floor | %.3f | beyond the failed dlopen: %.1f k |\n' "$label" \
    "$(echo "scale=3; ${ir[$label]} / ${ir[floor]}" | bc -l)" \
    "$(echo "scale=1; (${ir[$label]} - ${ir[floor]}) / 1000" | bc -l)"
done
echo
echo "loader-startup:$summary absent=$absent target=$target $([ $missed = 0 ] && echo met || echo "missed=$missed")"
