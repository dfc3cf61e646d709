#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh --suite SUITE (--payload DIR | --baseline) [--timeout SECS] [--memory MB]
#        [--log FILE] [--verbose]
# Boots the Soft-RoCE test VM of SUITE (bullseye, bookworm, trixie, sid, none)
# with DIR at /payload, runs /payload/guest-tests.sh in it and exits with that
# script's status. The console is streamed to stdout and to the log file.
# Exit 124: the guest hung (timeout); 125: it died without reporting a status.
# See README.md for the payload contract.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

usage() {
  sed -n '3,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

suite="" payload="" baseline=0 tmo=300 mem=256 log="" verbose=0
while [ $# -gt 0 ]; do
  case $1 in
    --suite) suite=${2:?}; shift 2 ;;
    --payload) payload=${2:?}; shift 2 ;;
    --baseline) baseline=1; shift ;;
    --timeout) tmo=${2:?}; shift 2 ;;
    --memory) mem=${2:?}; shift 2 ;;
    --log) log=${2:?}; shift 2 ;;
    --verbose) verbose=1; shift ;;
    -h | --help) usage ;;
    *) echo "run.sh: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$suite" ] || usage
if [ $baseline = 1 ]; then
  [ -z "$payload" ] || die "--baseline and --payload exclude each other"
elif [ -z "$payload" ]; then
  usage
else
  [ -d "$payload" ] || die "payload $payload is not a directory"
  [ -f "$payload/guest-tests.sh" ] || die "payload $payload has no guest-tests.sh"
fi
case $tmo in '' | *[!0-9]*) die "--timeout wants seconds" ;; esac
case $mem in '' | *[!0-9]*) die "--memory wants MiB" ;; esac

ensure_host_tools
t0=$(date +%s)
imgdir=$("$vm_here/build-image.sh" "$suite")
[ -f "$imgdir/done" ] || die "no image for $suite"
touch "$imgdir" # keeps it from the cleanup of unused images

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmadl-vm.XXXXXX")
booting=0
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  # Only a QEMU of ours that is still booting (its pid file is fresh).
  if [ "$booting" = 1 ] && [ -f "$tmp/qemu.pid" ]; then kill "$(cat "$tmp/qemu.pid")" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- payload: /payload plus the suite's libraries its binaries need ---------
st=$tmp/stage
mkdir -p "$st/payload"
if [ $baseline = 1 ]; then
  cp "$vm_here/../../tests/guest/baseline.sh" "$st/payload/guest-tests.sh"
else
  cp -a "$payload/." "$st/payload/"
fi
payload_cpio "$suite" "$imgdir" "$st" "$tmp/payload.cpio"
# The kernel unpacks concatenated cpio archives one after the other.
cat "$imgdir/base.cpio" "$tmp/payload.cpio" >"$tmp/initrd"

# --- accelerator ----------------------------------------------------------------
# 2 vCPUs: busy-polling ping-pongs crawl on 1.
vm_accel 2
# The uncompressed kernel (PVH entry) saves 3-4 s of decompression under TCG.
kernel=$imgdir/vmlinux
[ -f "$kernel" ] && [ "${RDMADL_VM_PVH:-1}" = 1 ] || kernel=$imgdir/vmlinuz
append="console=ttyS0 panic=-1 oops=panic mitigations=off no_timer_check" # see cluster.sh
[ $verbose = 1 ] || append+=" quiet"

if [ -z "$log" ]; then
  mkdir -p "$vmcache/logs"
  log=$vmcache/logs/$suite-$(date +%Y%m%d-%H%M%S)-$$.log
  find "$vmcache/logs" -name '*.log' -mtime +7 -delete 2>/dev/null || true
fi
: >"$log"

# boot: one QEMU run; the console goes to stdout and the log, CRs stripped.
boot() {
  local attempt=$1 line
  rm -f "$tmp/qemu.pid" "$tmp/early-kill"
  : >"$tmp/console"
  # A guest that never reaches /init (early Oops or stall) is killed early.
  (
    # Take the sleep along when the boot ends first.
    trap 'kill "$sp" 2>/dev/null; exit 0' TERM
    sleep "${RDMADL_VM_BOOT_DEADLINE:-60}" &
    sp=$!
    wait "$sp"
    if ! grep -q '^RDMADL-GUEST-START' "$tmp/console" && [ -f "$tmp/qemu.pid" ]; then
      touch "$tmp/early-kill"; kill "$(cat "$tmp/qemu.pid")" 2>/dev/null
    fi
  ) &
  local watchdog=$!
  echo "run.sh: booting $suite ($accel, ${mem} MiB, attempt $attempt, timeout ${tmo}s)" | tee -a "$log"
  set +e
  booting=1
  timeout -k 10 "$tmo" qemu-system-x86_64 -nodefaults -no-user-config -machine pc "${accel_args[@]}" \
    -m "$mem" -nic none -display none -monitor none -serial stdio -no-reboot \
    -kernel "$kernel" -initrd "$tmp/initrd" -append "$append" \
    -pidfile "$tmp/qemu.pid" </dev/null 2>&1 |
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line%$'\r'}
      printf '%s\n' "$line"
      printf '%s\n' "$line" >>"$tmp/console"
    done
  qrc=${PIPESTATUS[0]}
  booting=0
  set -e
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  cat "$tmp/console" >>"$log"
}

# Machine-wide (not per cache): one of the machine's QEMU slots (lib.sh,
# vm_lock_one; 2 on 2 cores: a third TCG guest would only slow the others).
vm_lock_one
t1=$(date +%s)
boot 1
if ! grep -q '^RDMADL-GUEST-START' "$tmp/console"; then
  echo "run.sh: the guest died before /init started (qemu status $qrc); retrying once" | tee -a "$log"
  boot 2
fi
t2=$(date +%s)
vm_unlock

status=$(sed -n 's/^RDMADL-GUEST-EXIT \([0-9]\{1,3\}\)$/\1/p' "$tmp/console" | tail -n 1)
timing="image $((t1 - t0))s, boot+tests $((t2 - t1))s"
if [ -n "$status" ]; then
  echo "run.sh: $suite guest exit status $status ($timing); log: $log" | tee -a "$log"
  exit "$status"
fi
if [ -f "$tmp/early-kill" ]; then
  msg="FAILED: the guest did not reach /init within ${RDMADL_VM_BOOT_DEADLINE:-60}s, twice"
  rc=125
elif [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
  msg="FAILED: the guest hung and was killed after the ${tmo}s timeout (no RDMADL-GUEST-EXIT line)"
  rc=124
elif grep -q '^RDMADL-GUEST-START' "$tmp/console"; then
  msg="FAILED: the guest died during the tests without a RDMADL-GUEST-EXIT line (qemu status $qrc)"
  rc=125
else
  msg="FAILED: the guest died before /init started, twice (qemu status $qrc)"
  rc=125
fi
echo "run.sh: $suite $msg ($timing); log: $log" | tee -a "$log" >&2
exit $rc
