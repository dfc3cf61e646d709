#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-all.sh: the README's test command, and what .ci/run calls. Runs every
# tier on a fresh Debian machine (installing what it needs):
#   prepare   apt packages (ci/install-deps.sh), the rdma-core releases
#             (ci/fetch-releases.sh; 28.0 and 32.0 built from source); then
#             the vm tier's images start building in the background (below)
#   symbols   loader/symbols.def against real rdma-core exports: 28.0/32.0 (built from
#             source) and Debian's 33.2/44.0/56.1/65.0
#   gcc       g++ -Werror build (benchmarks included) + all host tests (absent,
#             fakes, tier-2 real releases without devices, drop-in,
#             coexistence, threads, C++ API, install + find_package +
#             pkg-config consumers, and, in this tier only, the tests that
#             configure rdmadl again: the FetchContent consumer and what a
#             plain top-level configure builds); then perftest starts
#             building in the background against its link aliases
#   headers   the build read only the bundled rdma-core headers
#   docs      the reference manual: Doxygen over the public headers, no
#             warning (every public entity documented); the man page renders
#   shared    the same with BUILD_SHARED_LIBS=ON (librdmadl.so: exports, install)
#   clang-asan  clang++ -Werror build under ASan+UBSan (benchmarks and guest
#             programs included) + host tests and the parser fuzz targets
#   tsan      TSan build + host tests (16 threads racing into initialisation)
#   deb       the Debian packages (ci/build-deb.sh): built, lintian, Depends,
#             consumers built from them
#   vm        Soft-RoCE VMs: rc28 28.0, rc32 32.0 (built from source), bullseye
#             33.2, bookworm 44.0, trixie 56.1, sid
#             65.0 and an image without rdma-core (ci/test-vm.sh), two
#             single-node boots at a time; then the clusters. It first waits
#             for the background image and perftest builds and fails if they did.
# Past gcc, the tiers leave out the install tests that gcc (and, for
# install.consumer, shared) already ran, and shared and tsan build no
# program that no host test runs: the benchmarks and most guest programs
# (see "What each tier leaves out" below).
# Options: --skip-vm (local iteration only; CI never skips), --only TIER.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
skip_vm=0 only=""
while [ $# -gt 0 ]; do
  case $1 in
    --skip-vm) skip_vm=1 ;;
    --only) only=$2; shift ;;
    *) echo "usage: test-all.sh [--skip-vm] [--only TIER]" >&2; exit 2 ;;
  esac
  shift
done
if [ "${CI:-}" = true ] && [ $skip_vm = 1 ]; then
  echo "test-all: --skip-vm is not allowed in CI" >&2
  exit 2
fi
jobs=$(nproc)
# Many host tests wait (timeouts, peers, child processes) rather than
# compute: ctest runs twice as many at once as there are cores. The install
# tests, which build, count as 2 (their PROCESSORS) and start first (COST).
ctest_jobs=$((jobs * 2))
cache=${RDMADL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmadl}
releases=$cache/releases
tiers_passed=0 tiers_failed=0 tests_passed=0 tests_failed=0 failed_tiers=""
log=$root/build/test-logs
mkdir -p "$log"

# tier NAME CMD...: runs one tier, keeps its output in build/test-logs/NAME.log
# and adds up the "N tests failed out of M" / "N passed, M failed" lines.
tier() {
  local name=$1; shift
  [ -n "$only" ] && [ "$only" != "$name" ] && return 0
  echo "=== tier $name: $*"
  local start=$SECONDS rc
  "$@" 2>&1 | tee "$log/$name.log"
  rc=${PIPESTATUS[0]}
  local f t p
  while read -r f t; do # ctest: "N% tests passed, F tests failed out of T"
    tests_passed=$((tests_passed + t - f)); tests_failed=$((tests_failed + f))
  done < <(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' "$log/$name.log")
  while read -r p f; do # plain: "P passed, F failed"
    tests_passed=$((tests_passed + p)); tests_failed=$((tests_failed + f))
  done < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$log/$name.log")
  if [ "$rc" -eq 0 ]; then
    tiers_passed=$((tiers_passed + 1))
    echo "=== tier $name: PASS ($((SECONDS - start)) s)"
  else
    tiers_failed=$((tiers_failed + 1)); failed_tiers="$failed_tiers $name"
    echo "=== tier $name: FAIL (status $rc, $((SECONDS - start)) s; log: build/test-logs/$name.log)"
  fi
}

# Everything the tiers test, stated (a plain top-level build leaves the tests,
# examples and benchmarks out).
all_parts=(-DRDMADL_BUILD_TESTS=ON -DRDMADL_BUILD_EXAMPLES=ON -DRDMADL_BUILD_BENCH=ON
  -DRDMADL_BUILD_FFI=ON -DRDMADL_BUILD_TOOLS=ON -DRDMADL_INSTALL=ON)

build_and_test() { # NAME CC CXX FLAGS [ENV...] [-- CMAKE_ARGS...]
  local name=$1 cc=$2 cxx=$3 flags=$4; shift 4
  local dir=$root/build/$name env=() extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1"); shift; done
  [ $# -gt 0 ] && shift && extra=("$@")
  CC=$cc CXX=$cxx cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRDMADL_WERROR=ON -DRDMADL_RELEASES_DIR="$releases" "${all_parts[@]}" "${extra[@]}" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null &&
    cmake --build "$dir" -j "$jobs" &&
    env "${env[@]}" ctest --test-dir "$dir" -j "$ctest_jobs" --output-on-failure --timeout 300
}

prepare() {
  ci/install-deps.sh --deb $([ $skip_vm = 1 ] || echo --vm) && ci/fetch-releases.sh "$releases"
}

# --- the vm tier's I/O-bound preparation, in the background -----------------
# The VM images (ci/vm/build-image.sh: package downloads, dpkg-deb, cpio; about
# 12 min from an empty cache, mostly network and disk) build while the host
# tiers compile, and perftest (ci/build-perftest.sh: a source download, a
# serial ./configure, a small build) as soon as the gcc tier has built the
# link aliases it links against. Each job writes only its own log
# (build/test-logs/vm-images.log, vm-perftest.log) and, when it ends, its
# status; the vm tier waits for both, copies their logs into its own (whole,
# one after the other), and fails if either failed. ci/test-vm.sh then finds
# the images and perftest in the cache.
run_vm=1
if [ $skip_vm = 1 ] || { [ -n "$only" ] && [ "$only" != vm ]; }; then run_vm=0; fi
declare -A bg_pid=()
bg_start() { # NAME CMD...: runs CMD in the background into $log/NAME.log
  local name=$1; shift
  rm -f "$log/$name.status"; : >"$log/$name.log"
  ( "$@" >"$log/$name.log" 2>&1; echo $? >"$log/$name.status" ) </dev/null &
  bg_pid[$name]=$!
}
# Interrupted: the background jobs end with the run.
trap '[ ${#bg_pid[@]} = 0 ] || kill "${bg_pid[@]}" 2>/dev/null' EXIT
vm_images() {
  local s rc=0 t0=$SECONDS
  for s in $(awk '$1 == "release" {print $2}' ci/releases.txt) none; do
    echo "--- ci/vm/build-image.sh $s"
    ci/vm/build-image.sh "$s" || { echo "--- image $s FAILED"; rc=1; }
  done
  echo "--- images built in $((SECONDS - t0)) s"
  return $rc
}
vm_perftest() {
  local t0=$SECONDS rc
  ci/build-perftest.sh build/gcc; rc=$?
  echo "--- perftest built in $((SECONDS - t0)) s (status $rc)"
  return $rc
}
# vm_tier: waits for the background jobs, then the Soft-RoCE tier itself.
vm_tier() {
  local job st rc=0 t0=$SECONDS
  for job in vm-images vm-perftest; do
    while [ ! -f "$log/$job.status" ]; do
      if [ -z "${bg_pid[$job]:-}" ] || ! kill -0 "${bg_pid[$job]}" 2>/dev/null; then
        [ -f "$log/$job.status" ] || echo 1 >"$log/$job.status" # never started, or killed
        break
      fi
      sleep 2
    done
  done
  echo "=== vm: waited $((SECONDS - t0)) s for the background jobs"
  for job in vm-images vm-perftest; do
    st=$(cat "$log/$job.status")
    echo "=== vm: background job $job: status $st (build/test-logs/$job.log follows)"
    sed "s/^/$job| /" "$log/$job.log"
    if [ "$st" != 0 ]; then echo "=== vm: FAILED: background job $job (log: build/test-logs/$job.log)"; rc=1; fi
  done
  ci/test-vm.sh --build-dir build/gcc --debs build/deb || rc=1
  return $rc
}

tier prepare prepare
[ $run_vm = 0 ] || bg_start vm-images vm_images
tier symbols ci/check-symbols.sh "$releases"
tier gcc build_and_test gcc gcc g++ ""
[ $run_vm = 0 ] || bg_start vm-perftest vm_perftest
tier headers ci/check-headers.sh build/gcc
tier docs ci/build-docs.sh build/docs
# What each tier leaves out (tests/CMakeLists.txt, tests/guest/CMakeLists.txt):
# past gcc, install.fetchcontent/install.defaults (they configure rdmadl again
# from its source whatever the tier's flags: the gcc tier runs them);
# clang-asan and tsan, install.consumer too (gcc and shared install and
# consume each kind of librdmadl); shared and tsan also build no benchmarks and
# none of the guest programs no host test runs (nothing would run them there;
# gcc and clang-asan build them all with -Werror, each with its compiler).
# clang is one tier with ASan+UBSan: clang's -Werror, the sanitizers and the
# fuzz targets (which use ASan+UBSan themselves) from one build, where a
# clang tier and a gcc ASan tier built and tested everything twice.
once=-DRDMADL_TEST_RECONFIGURE=OFF noinst=-DRDMADL_TEST_INSTALL=OFF
unrun=(-DRDMADL_BUILD_BENCH=OFF -DRDMADL_GUEST_BUILD_ALL=OFF)
tier shared build_and_test shared gcc g++ "" -- -DBUILD_SHARED_LIBS=ON $once "${unrun[@]}"
supp=$root/tests/lsan.supp
tier clang-asan build_and_test clang-asan clang clang++ "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS=suppressions=$supp \
  -- $once $noinst
tier tsan build_and_test tsan clang clang++ "-fsanitize=thread" TSAN_OPTIONS=halt_on_error=1 \
  -- $once $noinst "${unrun[@]}"
tier deb ci/build-deb.sh --out build/deb
if [ $skip_vm = 0 ]; then
  tier vm vm_tier
else
  echo "=== tier vm: SKIPPED (--skip-vm)"
fi

echo
echo "test-all: tiers: $tiers_passed passed, $tiers_failed failed${failed_tiers:+ (failed:$failed_tiers)}"
echo "$tests_passed passed, $tests_failed failed"
[ "$tiers_failed" -eq 0 ]
