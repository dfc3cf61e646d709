#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-vm.sh: the Soft-RoCE tier. One host build of rdmadl's guest programs
# (tests/guest/programs.txt) runs inside a QEMU VM with real RDMA (rdma_rxe)
# on every rdma-core release in ci/releases.txt, plus an image with no rdma-core.
#
#   ci/test-vm.sh [--build-dir DIR] [--suites "bullseye bookworm ..."] [--timeout S]
#                 [--stages "single cluster"] [--clusters "sid,bullseye,bookworm,trixie sid,bullseye,none"]
#                 [--debs DIR]
#                 [--impair-cluster "sid,bookworm"]
#
# Steps: build (cmake -G Ninja -DRDMADL_WERROR=ON into build-vm, unless
# --build-dir names an existing build); build Debian's perftest against the
# build's link aliases (ci/build-perftest.sh, cached); build each suite's image
# (ci/vm/build-image.sh); derive each release's expected symbol list from its
# real libibverbs.so.1 / librdmacm.so.1 (readelf) and check ci/releases.txt
# against it; assemble one payload (the "single" programs of
# tests/guest/programs.txt, and tests/guest/ itself: the guest runs
# tests/guest/single.sh); boot each suite once (ci/vm/run.sh), as many at a
# time as the machine has QEMU slots (RDMADL_VM_SLOTS, default 2 on 2 cores);
# check the guest's RDMADL-CHECK lines against ci/releases.txt.
# The image without rdma-core also installs the Debian packages librdmadl0 and
# rdmadl-tools from --debs DIR (default build/deb, where ci/build-deb.sh puts
# them) and runs /usr/bin/rdmadl-info there (check deb.rdmadl-info); with no
# .debs in DIR that check fails: run ci/build-deb.sh first.
# Then the cluster stage, from the same build: each --clusters entry (2 to 4
# comma-separated suites) boots as one cluster (ci/vm/cluster.sh) and runs the
# cross-node plan of ci/vm/cluster-plan.sh; every check a side owes must PASS.
# Last, the --impair-cluster entry ("" for none) boots once more with the
# hub impairing RoCE frames (ci/vm/README.md, "Impaired frames").
# The last line is "N passed, M failed"; the exit status is non-zero if any
# check failed, a check was missing, or a boot failed or hung.
#
# Environment:
#   RDMADL_VM_BREAK=1|CHECK  flip one expected byte in the guest (rc.send_recv,
#                            or the named check) to show that the tier fails
#   RDMADL_VM_CLUSTER_BREAK=CHECK  the same, in the cluster stage only (e.g.
#                            rc.write: the target's check of a cross-node write)
#   RDMADL_VM_CHURN=N        every churn check runs N cycles (default: 20 to 100,
#                            tests/guest/cxx.sh; 1000 is issue 21's count, ~20 min
#                            of a TCG guest: give --timeout 3000)
#   RDMADL_VM_LOG_DIR        where guest logs go (default BUILD/vm-logs)
#   RDMADL_VM_SLOTS          QEMU slots: single-node boots at once (default 2
#                            on 2 or more cores; a cluster takes them all)
#   RDMADL_VM_IMPAIR         the impair cluster's hub profiles, "NAME:SPEC ..."
#                            (default: drop1 and drop5, README.md)
#   RDMADL_VM_IMPAIR_SEED    the hub's seed for them (default 1)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
releases=$here/releases.txt
manifest=$root/tests/guest/programs.txt
build=""
suites=""
timeout=300
stages="single cluster"
clusters="sid,rc28,bookworm,trixie sid,bullseye,none bullseye,bookworm,trixie"
cluster_timeout=600
impair_cluster=sid,bookworm
debs=$root/build/deb

# shellcheck source-path=SCRIPTDIR source=vm/lib.sh
. "$here/vm/lib.sh"
# shellcheck source-path=SCRIPTDIR source=vm/payload.sh
. "$here/vm/payload.sh"
die() { echo "test-vm: error: $*" >&2; exit 1; }
say() { echo "test-vm: $*" >&2; }

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --suites) suites=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --clusters) clusters=$2; shift 2 ;;
    --impair-cluster) impair_cluster=$2; shift 2 ;;
    --debs) debs=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1" ;;
  esac
done

# A missing QEMU is never a silent skip, in CI or not.
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 && [ "$(id -u)" -ne 0 ]; then
  echo "test-vm: FAILED: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

release_suites=$(awk '$1 == "release" {print $2}' "$releases")
[ -n "$suites" ] || suites="$release_suites none"
for v in RDMADL_VM_BREAK RDMADL_VM_CLUSTER_BREAK; do
  case ${!v:-} in *[!A-Za-z0-9._]*) die "$v: a check name or 1" ;; esac
done
case ${RDMADL_VM_CHURN:-} in *[!0-9]*) die "RDMADL_VM_CHURN: a number of cycles" ;; esac
for st in $stages; do
  case $st in single | cluster) ;; *) die "--stages: single and/or cluster, not '$st'" ;; esac
done
[[ " $stages " == *" single "* ]] || suites=""
[[ " $stages " == *" cluster "* ]] || clusters=""
[[ " $stages " == *" cluster "* ]] || impair_cluster=""
for c in $clusters $impair_cluster; do
  IFS=, read -r -a cn <<<"$c"
  if [ ${#cn[@]} -lt 2 ] || [ ${#cn[@]} -gt 4 ]; then die "--clusters: '$c' is not 2 to 4 suites"; fi
  for s in "${cn[@]}"; do
    [[ " ${release_suites//$'\n'/ } none " == *" $s "* ]] || die "--clusters: unknown suite '$s' in '$c'"
  done
  [ "${cn[0]}" != none ] || die "--clusters: the first node of '$c' must have rdma-core"
done

t_start=$(date +%s)

# --- build ------------------------------------------------------------------
if [ -z "$build" ]; then
  build=$root/build-vm
  cmake -S "$root" -B "$build" -G Ninja -DRDMADL_WERROR=ON -DRDMADL_BUILD_TESTS=ON \
    -DRDMADL_BUILD_EXAMPLES=ON -DRDMADL_BUILD_FFI=ON >/dev/null
else
  [ -f "$build/build.ninja" ] || die "$build is not a Ninja build directory"
  # Re-configure: the guest programs are tests and examples, and what
  # programs.txt lists is read by a CMake run only.
  cmake -S "$root" -B "$build" -DRDMADL_BUILD_TESTS=ON -DRDMADL_BUILD_EXAMPLES=ON \
    -DRDMADL_BUILD_FFI=ON >/dev/null
fi
# programs PAYLOAD: "NAME KIND" for each program of programs.txt in PAYLOAD.
programs() {
  awk -v p="$1" '!/^#/ && NF && index("," $3 ",", "," p ",") {print $1, $2}' "$manifest"
}
# program_file NAME KIND: where the build (or the source tree) has it.
program_file() {
  case $2 in
    example) echo "$build/examples/$1" ;;
    py) echo "$root/tests/guest/$1" ;;
    *) echo "$build/tests/guest/$1" ;;
  esac
}
wanted=$( (if [ -n "$suites" ]; then programs single; fi; if [ -n "$clusters$impair_cluster" ]; then programs cluster; fi) |
  sort -u)
targets=(rdmadl_verbs)
while read -r name kind; do
  [ "$kind" = py ] || targets+=("$(realpath -m --relative-to="$build" "$(program_file "$name" "$kind")")")
done <<<"$wanted"
say "building ${targets[*]}"
ninja -C "$build" -j2 "${targets[@]}" >"$build/test-vm-build.log" 2>&1 ||
  { tail -n 40 "$build/test-vm-build.log" >&2; die "build failed (log: $build/test-vm-build.log)"; }

logs=${RDMADL_VM_LOG_DIR:-$build/vm-logs}
rm -rf "$logs"; mkdir -p "$logs"
# perftest, unmodified, configured against this build's link aliases (once per
# run; cached by version). A failure fails every RDMA suite's perftest checks.
perftest=""
if [ -n "$suites" ]; then
  say "perftest against the link aliases (ci/build-perftest.sh)"
  perftest=$("$here/build-perftest.sh" "$build" 2>"$logs/perftest-build.log" | tail -n 1) || perftest=""
  if [ -z "$perftest" ]; then tail -n 20 "$logs/perftest-build.log" >&2; fi
fi
t_built=$(date +%s)

# --- images and expected symbol lists ---------------------------------------
# results/SUITE holds "name STATUS" lines (STATUS PASS, FAIL or UNSUPPORTED),
# from the host's own checks and from the guest.
results=$build/vm-results
rm -rf "$results"; mkdir -p "$results"
payload=$build/vm-payload
rm -rf "$payload"; mkdir -p "$payload/bin" "$payload/lib" "$payload/expected"
known=$build/gen/rdmadl_symbols.txt # "name node", from loader/symbols.def
[ -s "$known" ] || die "$known missing (not an rdmadl build?)"
declare -A imgdir=() version=()
# shellcheck source-path=SCRIPTDIR source=vm/suite-checks.sh
. "$here/vm/suite-checks.sh"

for s in $suites; do
  say "image $s"
  if ! img=$("$here/vm/build-image.sh" "$s" 2>"$logs/$s.image.log" | tail -n 1) || [ ! -f "$img/done" ]; then
    tail -n 20 "$logs/$s.image.log" >&2
    host_check "$s" image 0 "ci/vm/build-image.sh $s failed (log: $logs/$s.image.log)"
    continue
  fi
  imgdir[$s]=$img
  version[$s]=$(sed -n 's/^RDMA_CORE=//p' "$img/info")
  host_check "$s" perftest.build "$([ -n "$perftest" ] && echo 1 || echo 0)" \
    "ci/build-perftest.sh failed (log: $logs/perftest-build.log)"
  [ "$s" = none ] || suite_expect "$s" "$img" "$payload/expected/$s.list"
done
t_images=$(date +%s)

# --- payload --------------------------------------------------------------------
# bin/: the programs; guest/: tests/guest's scripts and programs.txt, which
# guest-tests.sh (single.sh) sources and reads.
while read -r name kind; do
  f=$(program_file "$name" "$kind")
  [ -f "$f" ] || die "$f not built"
  cp "$f" "$payload/bin/"
done < <(programs single)
mkdir -p "$payload/guest"
cp "$root"/tests/guest/*.sh "$manifest" "$payload/guest/"
cp -L "$build/librdmadl-verbs.so.0" "$payload/lib/"
# librdmadl-ffi: ffi_ops and the ctypes program only dlopen it.
cp -L "$build/ffi/librdmadl-ffi.so.0" "$payload/lib/"
# The Debian packages, unpacked as dpkg would install them (the guest has no
# dpkg): the none image copies this tree over its root.
for pkg in librdmadl0 rdmadl-tools; do
  found=0
  for deb in "$debs/${pkg}"_*.deb; do
    [ -f "$deb" ] || continue
    dpkg-deb -x "$deb" "$payload/deb" && found=1
  done
  [ $found = 1 ] || say "no $pkg .deb in $debs (ci/build-deb.sh)"
done
mkdir -p "$payload/perftest"
if [ -n "$perftest" ]; then
  cp "$perftest"/bin/ib_{send_bw,write_bw,read_bw,send_lat} "$payload/perftest/"
  cp -a "$perftest/lib" "$payload/perftest/"
fi
guest_script "$root/tests/guest/single.sh" "${RDMADL_VM_BREAK:-}" "${RDMADL_VM_CHURN:-}" \
  >"$payload/guest-tests.sh"
strip_debug "$payload"

# --- boots, two at a time ----------------------------------------------------
# Each boot takes one of the machine's QEMU slots (ci/vm/lib.sh: 2 on 2 cores),
# so as many boots run at once as there are slots: each writes only its own
# log, and the results are read afterwards, in suite order.
declare -A boot_secs=()
nslots=$(vm_slot_count)
boot_one() { # SUITE: ci/vm/run.sh, its status and wall time into $logs/SUITE.status
  local s=$1 b0 st
  b0=$(date +%s)
  set +e
  "$here/vm/run.sh" --suite "$s" --payload "$payload" --timeout "$timeout" >"$logs/$s.log" 2>&1
  st=$?
  set -e
  echo "$st $(($(date +%s) - b0))" >"$logs/$s.status"
}
running=0
for s in $suites; do
  [ -n "${imgdir[$s]:-}" ] || continue
  if [ "$running" -ge "$nslots" ]; then wait -n || true; running=$((running - 1)); fi
  say "booting $s (rdma-core ${version[$s]:-none})"
  rm -f "$logs/$s.status"
  boot_one "$s" &
  running=$((running + 1))
done
wait || true
for s in $suites; do
  [ -n "${imgdir[$s]:-}" ] || continue
  st=1 secs=0
  [ ! -f "$logs/$s.status" ] || read -r st secs <"$logs/$s.status"
  boot_secs[$s]=$secs
  tr -d '\r' <"$logs/$s.log" >"$logs/$s.clean.log"
  awk '/^RDMADL-CHECK [^ ]+ (PASS|FAIL|UNSUPPORTED)$/ {print $2, $3}' "$logs/$s.clean.log" >>"$results/$s"
  host_check "$s" guest.exit "$([ "$st" = 0 ] && echo 1 || echo 0)" \
    "ci/vm/run.sh exited $st after ${boot_secs[$s]} s (log: $logs/$s.log)"
  if [ "$st" != 0 ]; then
    grep -vE '^RDMADL-CHECK .* PASS$' "$logs/$s.clean.log" | tail -n 40 | sed "s/^/  $s| /" >&2
  fi
done

# --- cluster stage: the same build across nodes ------------------------------
# shellcheck source-path=SCRIPTDIR source=vm/cluster-stage.sh
. "$here/vm/cluster-stage.sh"
cluster_summary=() cluster_failed=()
ck=0 cl_pass=0 cl_fail=0
for c in $clusters; do
  ck=$((ck + 1))
  IFS=, read -r -a cn <<<"$c"
  cluster_stage "$ck" "${cn[@]}"
done
if [ -n "$impair_cluster" ]; then
  ck=$((ck + 1))
  IFS=, read -r -a cn <<<"$impair_cluster"
  cl_impair=${RDMADL_VM_IMPAIR:-drop1:drop=0.01,dup=0.005,reorder=0.01,delay=1 drop5:drop=0.05,dup=0.01,reorder=0.02,delay=1 noroce:drop=1 nortu:rtu=1}
  cluster_stage "$ck" "${cn[@]}"
  cl_impair=""
fi

# --- verdict ------------------------------------------------------------------------
total_pass=0 total_fail=0
summary=()
for s in $suites; do
  read -r n p < <(suite_verdict "$s")
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + n - p))
  label=$s
  if [ "$s" = none ]; then label="none (no rdma-core)"; else label="$s (rdma-core ${version[$s]:-?})"; fi
  summary+=("$label: $n checks, $p passed${boot_secs[$s]:+, boot ${boot_secs[$s]} s}")
done

echo
echo "Soft-RoCE tier: build $((t_built - t_start)) s, images $((t_images - t_built)) s, total $(($(date +%s) - t_start)) s; logs in $logs"
for l in "${summary[@]}"; do echo "$l"; done
for s in $suites; do awk -v s="$s" '$2 == "FAIL" {print "failed: " s ": " $1}' "$results/$s"; done
if [ -n "$clusters$impair_cluster" ]; then
  echo "Cluster stage (node <- node: server <- client; suite (rdma-core release)):"
  for l in "${cluster_summary[@]}"; do echo "$l"; done
  for l in "${cluster_failed[@]}"; do echo "failed: $l"; done
  total_pass=$((total_pass + cl_pass))
  total_fail=$((total_fail + cl_fail))
fi
[ -z "${RDMADL_VM_BREAK:-}" ] || echo "(RDMADL_VM_BREAK=$RDMADL_VM_BREAK was set: failures were requested)"
[ -z "${RDMADL_VM_CLUSTER_BREAK:-}" ] ||
  echo "(RDMADL_VM_CLUSTER_BREAK=$RDMADL_VM_CLUSTER_BREAK was set: failures were requested)"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ] && [ "$total_pass" -gt 0 ]
