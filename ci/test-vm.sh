#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-vm.sh: the Soft-RoCE tier. One host build of rdmadl's drop-in test
# programs (tests/guest/) runs inside a QEMU VM with real RDMA (rdma_rxe) on
# every rdma-core release in ci/releases.txt, plus an image with no rdma-core.
#
#   ci/test-vm.sh [--build-dir DIR] [--suites "bullseye bookworm ..."] [--timeout S]
#                 [--stages "single cluster"] [--clusters "sid,bullseye,bookworm,trixie sid,bullseye,none"]
#                 [--debs DIR]
#
# Steps: build (cmake -G Ninja -DRDMADL_WERROR=ON into build-vm, unless
# --build-dir names an existing build); build Debian's perftest against the
# build's link aliases (ci/build-perftest.sh, cached); build each suite's image
# (ci/vm/build-image.sh); derive each release's expected symbol list from its
# real libibverbs.so.1 / librdmacm.so.1 (readelf) and check ci/releases.txt
# against it; assemble one payload; boot each suite once (ci/vm/run.sh), one
# at a time; check the guest's RDMADL-CHECK lines against ci/releases.txt.
# The image without rdma-core also installs the Debian packages librdmadl0 and
# rdmadl-tools from --debs DIR (default build/deb, where ci/build-deb.sh puts
# them) and runs /usr/bin/rdmadl-info there (check deb.rdmadl-info); with no
# .debs in DIR that check fails: run ci/build-deb.sh first.
# Then the cluster stage, from the same build: each --clusters entry (2 to 4
# comma-separated suites) boots as one cluster (ci/vm/cluster.sh) and runs the
# cross-node plan of ci/vm/cluster-plan.sh; every check a side owes must PASS.
# The last line is "N passed, M failed"; the exit status is non-zero if any
# check failed, a check was missing, or a boot failed or hung.
#
# Environment:
#   RDMADL_VM_BREAK=1|CHECK  flip one expected byte in the guest (rc.send_recv,
#                            or the named check) to show that the tier fails
#   RDMADL_VM_CLUSTER_BREAK=CHECK  the same, in the cluster stage only (e.g.
#                            rc.write: the target's check of a cross-node write)
#   RDMADL_VM_LOG_DIR        where guest logs go (default BUILD/vm-logs)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
releases=$here/releases.txt
build=""
suites=""
timeout=300
stages="single cluster"
clusters="sid,rc28,bookworm,trixie sid,bullseye,none bullseye,bookworm,trixie"
cluster_timeout=600
debs=$root/build/deb

die() { echo "test-vm: error: $*" >&2; exit 1; }
say() { echo "test-vm: $*" >&2; }

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --suites) suites=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --clusters) clusters=$2; shift 2 ;;
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
case ${RDMADL_VM_BREAK:-} in
  "" | *[!A-Za-z0-9._]*) [ -z "${RDMADL_VM_BREAK:-}" ] || die "RDMADL_VM_BREAK: a check name or 1" ;;
esac
case ${RDMADL_VM_CLUSTER_BREAK:-} in
  "" | *[!A-Za-z0-9._]*) [ -z "${RDMADL_VM_CLUSTER_BREAK:-}" ] || die "RDMADL_VM_CLUSTER_BREAK: a check name or 1" ;;
esac
for st in $stages; do
  case $st in single | cluster) ;; *) die "--stages: single and/or cluster, not '$st'" ;; esac
done
[[ " $stages " == *" single "* ]] || suites=""
[[ " $stages " == *" cluster "* ]] || clusters=""
for c in $clusters; do
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
  # Re-configure: directories added since (examples/, tests/cxx/) are only
  # picked up by a CMake run.
  # The guest programs are tests and examples: a build made without them gets them.
  cmake -S "$root" -B "$build" -DRDMADL_BUILD_TESTS=ON -DRDMADL_BUILD_EXAMPLES=ON \
    -DRDMADL_BUILD_FFI=ON >/dev/null
fi
targets=(tests/guest/all rdmadl_verbs)
[ -z "$clusters" ] || targets+=(examples/all tests/cxx/rdmadl-mc-cluster)
cxx_list=$root/tests/cxx/guest-tests.sh
if [ -f "$cxx_list" ]; then
  # Whatever executables the C++ tier's lines name, from tests/cxx or examples.
  all_targets=$(ninja -C "$build" -t targets all 2>/dev/null | cut -d: -f1)
  for w in $(grep -v '^[[:space:]]*#' "$cxx_list" | tr -c 'A-Za-z0-9_.-' ' '); do
    for d in tests/cxx examples; do
      if grep -qxF "$d/$w" <<<"$all_targets"; then targets+=("$d/$w"); fi
    done
  done
fi
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
payload=$build/vm-payload
rm -rf "$payload"; mkdir -p "$payload/bin" "$payload/lib" "$payload/expected"

# --- results ------------------------------------------------------------------
# results/SUITE holds "name STATUS" lines (STATUS PASS, FAIL or UNSUPPORTED),
# from the host's own checks and from the guest.
results=$build/vm-results
rm -rf "$results"; mkdir -p "$results"
host_check() { # SUITE NAME OK [DETAIL]
  local st=PASS
  [ "$3" = 1 ] || st=FAIL
  echo "$2 $st" >>"$results/$1"
  [ $st = PASS ] || echo "test-vm: $1: $2 FAILED${4:+: $4}" >&2
}

# --- images and expected symbol lists ---------------------------------------
known=$build/gen/rdmadl_symbols.txt # "name node", from loader/symbols.def
[ -s "$known" ] || die "$known missing (not an rdmadl build?)"
declare -A imgdir=() version=()

# exports LIB: "name node" for each public default-version symbol, plus
# ibv_register_driver's non-default IBVERBS_1.1 entry; IBVERBS_PRIVATE_* never.
exports() {
  readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $7 != "ABS" && $8 ~ /@/ {print $8}' |
    awk '/@@/ {split($0, a, "@@"); print a[1], a[2]; next}
         /^ibv_register_driver@IBVERBS_1\.1$/ {split($0, a, "@"); print a[1], a[2]}' |
    grep -v ' IBVERBS_PRIVATE' | LC_ALL=C sort -u
}

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
  [ "$s" != none ] || continue
  libdir=$img/sysroot/usr/lib/x86_64-linux-gnu
  list=$payload/expected/$s.list
  : >"$list"
  # libibverbs and librdmacm must be there; the providers' direct-verbs
  # libraries and libibumad where the release ships them (loader_diag then
  # expects each one it is told a node of to load, and the others not found).
  for lib in libibverbs librdmacm libmlx5 libefa libmlx4 libhns libmana libionic libibumad; do
    so=$lib.so.1
    [ $lib != libibumad ] || so=$lib.so.3
    f=$(readlink -f "$libdir/$so") || f=""
    if [ ! -f "$f" ]; then
      case $lib in libibverbs | librdmacm) host_check "$s" "exports.$lib" 0 "no $so in $img/sysroot" ;; esac
      continue
    fi
    exports "$f" >"$logs/$s.$lib.exports"
    node=$(readelf -V -W "$f" | sed -n 's/.*Name: \([A-Z0-9]*_1\.[0-9.]*\)$/\1/p' | sort -uV | tail -n 1)
    echo "@node $lib $node" >>"$list"
    # A public name rdmadl's table does not know is a new release's addition:
    # fail loudly, so loader/symbols.def gets it.
    unknown=$(awk 'NR == FNR {k[$1] = 1; next} !($1 in k) {print $1 "@" $2}' "$known" "$logs/$s.$lib.exports")
    host_check "$s" "exports.$lib.known" "$([ -z "$unknown" ] && echo 1 || echo 0)" \
      "exported but not in loader/symbols.def: ${unknown//$'\n'/ }"
    awk 'NR == FNR {k[$1] = 1; next} ($1 in k)' "$known" "$logs/$s.$lib.exports" >>"$list"
  done
  # ci/releases.txt against the truth: the version, and each feature's symbol.
  col=$(awk -v s="$s" '$1 == "release" {n++; if ($2 == s) print n}' "$releases")
  declared=$(awk -v s="$s" '$1 == "release" && $2 == s {print $3}' "$releases")
  host_check "$s" expect.version "$([ -n "$col" ] && [[ ${version[$s]} == "$declared"* ]] && echo 1 || echo 0)" \
    "image has rdma-core ${version[$s]}, ci/releases.txt says ${declared:-nothing}"
  while read -r _ feat sym rest; do
    [ "$sym" != - ] || continue
    want=$(echo "$rest" | awk -v c="$col" '{print $c}')
    have=no
    grep -q "^$sym " "$logs/$s.libibverbs.exports" && have=yes
    [ "$want" != device ] || want=yes # the library has it; the device does not
    [ "$want" != emulated ] || want=no # rdmadl's fallback stands in for it
    host_check "$s" "expect.declared.$feat" "$([ "$want" = "$have" ] && echo 1 || echo 0)" \
      "ci/releases.txt says $want, libibverbs ${version[$s]} exports $sym: $have"
  done < <(grep '^feature ' "$releases")
done
t_images=$(date +%s)

# --- payload --------------------------------------------------------------------
# strip_debug DIR: drops the debug sections of every ELF file under DIR. The
# guest unpacks the payload into RAM (256 MiB, shared with the kernel and the
# image), and a RelWithDebInfo build's test programs are mostly DWARF: with
# it, sid's larger image no longer fit ("Initramfs unpacking failed: write
# error", or SIGBUS in a program whose pages could not be backed). Symbols
# (.symtab, .dynsym) stay, so backtraces and dlvsym work as before.
strip_debug() {
  local f
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    strip --strip-debug "$f" || die "strip --strip-debug $f failed"
  done < <(find "$1" -type f -print0)
}
progs="rc_ops ud_srq comp_channel ex_api cm_pingpong strs loader_diag buf_pingpong rc_ops_shared ffi_ops
  dv_umad"
for p in $progs; do
  [ -x "$build/tests/guest/$p" ] || die "$build/tests/guest/$p not built"
  cp "$build/tests/guest/$p" "$payload/bin/"
done
cp -L "$build/librdmadl-verbs.so.0" "$payload/lib/"
# librdmadl-ffi: ffi_ops and the ctypes program only dlopen it.
cp -L "$build/ffi/librdmadl-ffi.so.0" "$payload/lib/"
cp "$root/tests/guest/ffi_pingpong.py" "$payload/"
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
{
  cat <<'EOF'
#!/bin/sh
# Generated by ci/test-vm.sh: the Soft-RoCE tier's guest side (busybox sh).
# Every check prints "RDMADL-CHECK <name> PASS|FAIL|UNSUPPORTED"; the host
# decides. A program that exits non-zero also prints "<prog>.exit FAIL".
status=0
step() {
  echo "RDMADL-STEP $* up=$(cut -d' ' -f1 /proc/uptime)s"
}
# run NAME CMD...: one program, killed after 120 s.
run() {
  name=$1
  shift
  step "$name"
  timeout 120 "$@"
  st=$?
  if [ $st -ne 0 ]; then
    echo "RDMADL-CHECK $name.exit FAIL"
    echo "$name exited with status $st" >&2
    status=1
  fi
}
# run_shared: the same with the shared-linked rc_ops; its checks get a prefix.
run_shared() {
  step rc_ops_shared
  timeout 120 rc_ops_shared "$@" >/tmp/shared.out
  st=$?
  sed 's/^RDMADL-CHECK /RDMADL-CHECK shared./' /tmp/shared.out
  if [ $st -ne 0 ]; then echo "RDMADL-CHECK shared.exit FAIL"; status=1; fi
}
check() { # NAME STATUS(0 = pass)
  if [ "$2" -eq 0 ]; then echo "RDMADL-CHECK $1 PASS"; else echo "RDMADL-CHECK $1 FAIL"; status=1; fi
}
EOF
  if [ -n "${RDMADL_VM_BREAK:-}" ]; then
    echo "# RDMADL_VM_BREAK: a deliberately broken byte check, to prove the tier fails."
    echo "export RDMADL_VM_BREAK=${RDMADL_VM_BREAK}"
  fi
  cat <<'EOF'
if [ "$RDMADL_SUITE" = none ]; then
  # No rdma-core at all and no override variable: clean EOPNOTSUPP failures.
  for p in rc_ops ud_srq comp_channel ex_api cm_pingpong loader_diag strs buf_pingpong dv_umad; do
    run "$p" "$p" --absent
  done
  run_shared --absent
  run ffi_ops ffi_ops --absent
  # The Debian packages librdmadl0 + rdmadl-tools, installed: the packaged
  # rdmadl-info starts from /usr/bin with the system's library path only and
  # says there is no RDMA library (exit status 1).
  step deb
  if [ -x /payload/deb/usr/bin/rdmadl-info ] && cp -a /payload/deb/. /; then
    env -u LD_LIBRARY_PATH /usr/bin/rdmadl-info >/tmp/deb-info.txt 2>&1
    st=$?
    cat /tmp/deb-info.txt
    check deb.rdmadl-info $([ $st -eq 1 ] && grep -q '^usable: no' /tmp/deb-info.txt && echo 0 || echo 1)
  else
    echo "no Debian packages in the payload (ci/build-deb.sh, then ci/test-vm.sh --debs DIR)" >&2
    check deb.rdmadl-info 1
  fi
else
  # Baseline: Debian's own tools, so a failure here is the VM, not rdmadl.
  step baseline
  ibv_devinfo -d "$RDMADL_TEST_DEVICE" >/tmp/devinfo 2>&1
  st=$?
  grep -q PORT_ACTIVE /tmp/devinfo || st=1
  check baseline.ibv_devinfo $st
  [ $st -eq 0 ] || cat /tmp/devinfo
  # Server and client on the same device; the client retries until the server listens.
  ( timeout 60 ibv_rc_pingpong -d "$RDMADL_TEST_DEVICE" -g "$RDMADL_TEST_GID_INDEX" -n 100 >/tmp/pp.srv 2>&1; echo $? >/tmp/pp.srv.st ) &
  n=0
  while :; do
    timeout 60 ibv_rc_pingpong -d "$RDMADL_TEST_DEVICE" -g "$RDMADL_TEST_GID_INDEX" -n 100 127.0.0.1 >/tmp/pp.cli 2>&1 && break
    n=$((n + 1)); [ $n -lt 20 ] || break
    sleep 0.25
  done
  wait
  check baseline.ibv_rc_pingpong $([ $n -lt 20 ] && [ "$(cat /tmp/pp.srv.st)" = 0 ] && echo 0 || echo 1)
  grep -h 'iters in' /tmp/pp.cli || cat /tmp/pp.srv /tmp/pp.cli
  ( timeout 60 rping -s -a "$RDMADL_TEST_IP" -C 10 >/tmp/rp.srv 2>&1; echo $? >/tmp/rp.srv.st ) &
  n=0
  while :; do
    timeout 60 rping -c -a "$RDMADL_TEST_IP" -C 10 -v >/tmp/rp.cli 2>&1 && break
    n=$((n + 1)); [ $n -lt 20 ] || break
    sleep 0.25
  done
  wait
  check baseline.rping $([ $n -lt 20 ] && [ "$(cat /tmp/rp.srv.st)" = 0 ] &&
    [ "$(grep -c 'ping data' /tmp/rp.cli)" -eq 10 ] && echo 0 || echo 1)

  # rdmadl's drop-in programs.
  run rc_ops rc_ops
  run ud_srq ud_srq
  run comp_channel comp_channel
  run ex_api ex_api
  run cm_pingpong cm_pingpong
  run strs strs
  run loader_diag loader_diag "/payload/expected/$RDMADL_SUITE.list"
  run buf_pingpong buf_pingpong "/payload/expected/$RDMADL_SUITE.list"
  # Provider direct verbs and libibumad: the drop-in against the real libraries.
  run dv_umad dv_umad
  run_shared
  # librdmadl-ffi through dlopen/dlsym (C), and from Python's ctypes.
  run ffi_ops ffi_ops
  py=$(ls /usr/bin/python3.* 2>/dev/null | head -n 1)
  if [ -n "$py" ]; then
    run ffi_pingpong "$py" -S /payload/ffi_pingpong.py
  else
    echo "no python3 in the image" >&2
    check ffi_pingpong.python 1
  fi
fi
EOF
} >"$payload/guest-tests.sh"
if [ -f "$cxx_list" ]; then
  # The C++ tier's lines; copy every executable they name from the build tree.
  for w in $(grep -v '^[[:space:]]*#' "$cxx_list" | tr -c 'A-Za-z0-9_.-' ' '); do
    for d in tests/cxx examples; do
      f=$build/$d/$w
      if [ -f "$f" ] && [ -x "$f" ] && [ ! -e "$payload/bin/$w" ]; then cp "$f" "$payload/bin/"; fi
    done
  done
  { echo; echo "# --- tests/cxx/guest-tests.sh ---"; cat "$cxx_list"; } >>"$payload/guest-tests.sh"
fi
{ echo; echo "# --- tests/perftest/guest-tests.sh ---"; cat "$root/tests/perftest/guest-tests.sh"; } \
  >>"$payload/guest-tests.sh"
# shellcheck disable=SC2016 # guest-side variable
echo 'exit $status' >>"$payload/guest-tests.sh"
strip_debug "$payload"

# --- boots, one at a time -----------------------------------------------------
declare -A boot_secs=()
for s in $suites; do
  [ -n "${imgdir[$s]:-}" ] || continue
  while pgrep -f qemu-system >/dev/null 2>&1; do
    say "another QEMU is running; waiting"
    sleep 5
  done
  say "booting $s (rdma-core ${version[$s]:-none})"
  b0=$(date +%s)
  set +e
  "$here/vm/run.sh" --suite "$s" --payload "$payload" --timeout "$timeout" >"$logs/$s.log" 2>&1
  st=$?
  set -e
  boot_secs[$s]=$(($(date +%s) - b0))
  tr -d '\r' <"$logs/$s.log" >"$logs/$s.clean.log"
  awk '/^RDMADL-CHECK [^ ]+ (PASS|FAIL|UNSUPPORTED)$/ {print $2, $3}' "$logs/$s.clean.log" >>"$results/$s"
  host_check "$s" guest.exit "$([ $st = 0 ] && echo 1 || echo 0)" \
    "ci/vm/run.sh exited $st after ${boot_secs[$s]} s (log: $logs/$s.log)"
  if [ $st != 0 ]; then
    grep -vE '^RDMADL-CHECK .* PASS$' "$logs/$s.clean.log" | tail -n 40 | sed "s/^/  $s| /" >&2
  fi
done

# --- cluster stage: the same build across nodes ------------------------------
# shellcheck source-path=SCRIPTDIR source=vm/cluster-plan.sh
. "$here/vm/cluster-plan.sh"
cluster_summary=() cluster_failed=()
ck=0 cl_pass=0 cl_fail=0
for c in $clusters; do
  ck=$((ck + 1))
  IFS=, read -r -a cn <<<"$c"
  for s in "${cn[@]}"; do
    [ -z "${imgdir[$s]:-}" ] || continue
    if img=$("$here/vm/build-image.sh" "$s" 2>"$logs/$s.image.log" | tail -n 1) && [ -f "$img/done" ]; then
      imgdir[$s]=$img
      version[$s]=$(sed -n 's/^RDMA_CORE=//p' "$img/info")
    fi
  done
  cpay=$build/vm-cluster-$ck
  rm -rf "$cpay"; mkdir -p "$cpay/bin"
  cp "$build/tests/guest/rc_ops" "$build/tests/guest/cm_pingpong" "$cpay/bin/"
  for e in pingpong write-read optional-rdma; do cp "$build/examples/rdmadl-example-$e" "$cpay/bin/"; done
  cp "$build/tests/cxx/rdmadl-mc-cluster" "$cpay/bin/"
  {
    echo '#!/bin/sh'
    echo '# Generated by ci/test-vm.sh from ci/vm/cluster-tests.sh.'
    [ -z "${RDMADL_VM_CLUSTER_BREAK:-}" ] || echo "export RDMADL_VM_BREAK=$RDMADL_VM_CLUSTER_BREAK"
    sed 1d "$here/vm/cluster-tests.sh"
  } >"$cpay/guest-tests.sh"
  strip_debug "$cpay"
  cluster_plan "${cn[@]}" >"$cpay/cluster-plan"
  clog=$logs/cluster-$ck
  say "cluster $ck: ${cn[*]} ($(wc -l <"$cpay/cluster-plan") cross-node tests)"
  b0=$(date +%s)
  set +e
  "$here/vm/cluster.sh" --nodes "${cn[*]}" --payload "$cpay" --timeout "$cluster_timeout" \
    --log-dir "$clog" >"$clog.log" 2>&1
  st=$?
  set -e
  secs=$(($(date +%s) - b0))
  label() { # NODE: "nI SUITE (rdma-core V)"
    local s=${cn[$1]}
    if [ "$s" = none ]; then echo "n$1 none (no rdma-core)"; else echo "n$1 $s (${version[$s]:-?})"; fi
  }
  # Each node: a clean exit, or killed because a test asked for it.
  touch "$clog/nodes" "$clog/checks"
  lines=()
  for ((i = 0; i < ${#cn[@]}; i++)); do
    what=$(awk -v i="$i" '$1 == i {$1 = $2 = $3 = ""; sub(/^ +/, ""); print}' "$clog/nodes")
    want="exit 0"
    while read -r _ kind srv cli _; do
      [ "$(cluster_killed "$kind" "$srv" "$cli")" != "$i" ] || want="killed on request"
    done <"$cpay/cluster-plan"
    if [ "$what" = "$want" ]; then
      cl_pass=$((cl_pass + 1))
    else
      cl_fail=$((cl_fail + 1))
      cluster_failed+=("cluster $ck: node $i (${cn[$i]}): ${what:-no status}, want $want")
    fi
    lines+=("  $(label "$i"), 192.0.2.$((10 + i)): ${what:-no status}")
  done
  # Each plan line: every check each side owes, reported and PASS; any other
  # check a side printed for it must pass too.
  while read -r id kind srv cli _; do
    n=0 p=0 owed_all="" nodes_in=""
    while read -r node side; do
      owed_all+=" $(cluster_owed "$kind" "$side")"
      nodes_in+=" node$node"
      for chk in $(cluster_owed "$kind" "$side"); do
        got=$(awk -v k="node$node" -v c="$id:$chk" '$1 == k && $2 == c {print $3; exit}' "$clog/checks")
        n=$((n + 1))
        if [ "$got" = PASS ]; then
          p=$((p + 1))
        else
          cluster_failed+=("cluster $ck: $id: node $node: $chk ${got:-never reported}")
        fi
      done
    done < <(cluster_sides "$kind" "$srv" "$cli")
    extra=$(awk -v nodes="$nodes_in " -v id="$id:" \
      'index(nodes, " " $1 " ") && index($2, id) == 1 && $3 != "PASS" {print $1 ":" $2 ":" $3}' "$clog/checks")
    for e in $extra; do
      n=$((n + 1))
      case " $owed_all " in
        *" $(echo "$e" | cut -d: -f3) "*) n=$((n - 1)) ;; # already counted as owed
        *) cluster_failed+=("cluster $ck: $id: $e") ;;
      esac
    done
    cl_pass=$((cl_pass + p))
    cl_fail=$((cl_fail + n - p))
    if [ "$kind" = mc ]; then
      who=$(for r in ${srv//,/ }; do label "$r"; done | paste -sd, - | sed 's/,/, /g')
    else
      who="$(label "$srv") <- $(label "$cli")"
    fi
    lines+=("  $id: $who: $n checks, $p passed")
  done <"$cpay/cluster-plan"
  cluster_summary+=("cluster $ck (${cn[*]}): $secs s, cluster.sh exit $st" "${lines[@]}")
  if [ "$st" != 0 ]; then
    grep -E 'FAILED|RDMADL-CHECK .* FAIL$|hung|died' "$clog.log" | tail -n 40 | sed "s/^/  cluster $ck| /" >&2
  fi
done

# --- verdict ------------------------------------------------------------------------
# The guest's lines against ci/releases.txt: every required check reported;
# UNSUPPORTED only for a feature the release is declared to lack, PASS for one
# it has.
required=$(awk '$1 == "checks" {for (i = 2; i <= NF; i++) print $i}' "$releases")
absent_required=$(awk '$1 == "absent" {for (i = 2; i <= NF; i++) print $i}' "$releases")
total_pass=0 total_fail=0
summary=()
for s in $suites; do
  r=$results/$s
  touch "$r"
  declare -A nofeat=()
  if [ -n "${imgdir[$s]:-}" ]; then
    if [ "$s" = none ]; then req=$absent_required; else req=$required; fi
    unreported=""
    for c in $req; do
      grep -q "^$c " "$r" || unreported+=" $c"
    done
    host_check "$s" all-reported "$([ -z "$unreported" ] && echo 1 || echo 0)" \
      "$(wc -w <<<"$unreported") required checks never reported:$unreported"
    if [ "$s" != none ]; then
      col=$(awk -v s="$s" '$1 == "release" {n++; if ($2 == s) print n}' "$releases")
      while read -r _ feat _ rest; do
        want=$(echo "$rest" | awk -v c="$col" '{print $c}')
        got=$(awk -v c="feature.$feat" '$1 == c {print $2; exit}' "$r")
        why=$(awk -v c="feature.$feat" '$1 == "RDMADL-WHY" && $2 == c {print $3; exit}' "$logs/$s.clean.log")
        case $want in
          yes | emulated) exp=PASS ;;
          no) exp="UNSUPPORTED library" ;;
          device) exp="UNSUPPORTED device" ;;
          *) exp="a valid declaration (yes/no/device/emulated, not '$want')" ;;
        esac
        [ "$want" = yes ] || [ "$want" = emulated ] || nofeat[feature.$feat]=1
        got="$got${why:+ $why}"
        host_check "$s" "expect.feature.$feat" "$([ "$got" = "$exp" ] && echo 1 || echo 0)" \
          "declared $want, guest reported ${got:-nothing} (want $exp)"
      done < <(grep '^feature ' "$releases")
    fi
  fi
  # Tally: PASS passes; UNSUPPORTED passes only for a declared-missing feature.
  read -r n p < <(awk -v allowed=" ${!nofeat[*]} " '
    {n++} $2 == "PASS" {p++}
    $2 == "UNSUPPORTED" { if (index(allowed, " " $1 " ")) p++; else print "test-vm: unexpected UNSUPPORTED: " $1 > "/dev/stderr" }
    END {print n + 0, p + 0}' "$r")
  unset nofeat
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
if [ -n "$clusters" ]; then
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
