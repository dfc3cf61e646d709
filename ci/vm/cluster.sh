#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cluster.sh --nodes "SUITE SUITE [SUITE [SUITE]]" --payload DIR [--timeout SECS]
#            [--memory MB] [--smp N] [--log-dir DIR] [--verbose]
#            [--impair NAME:SPEC]... [--seed N]
# Boots 2 to 4 Soft-RoCE test VMs at once, node I with SUITE I's image, on one
# virtual Ethernet segment (ci/vm/hub.c over unix datagram sockets: no host
# interface is involved), runs /payload/guest-tests.sh (DIR, the payload
# contract of run.sh) on every node and exits 0 when every node's script did.
# --impair and --seed go to the hub: impairment profiles a guest can select
# (README.md, "Impaired frames"). See README.md, "Cluster runs".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

usage() {
  sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

nodes="" payload="" tmo=300 mem=${RDMADL_VM_CLUSTER_MEMORY:-256} smp=${RDMADL_VM_CLUSTER_SMP:-1}
logdir="" verbose=0 hub_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --nodes) nodes=${2:?}; shift 2 ;;
    --payload) payload=${2:?}; shift 2 ;;
    --timeout) tmo=${2:?}; shift 2 ;;
    --memory) mem=${2:?}; shift 2 ;;
    --smp) smp=${2:?}; shift 2 ;;
    --log-dir) logdir=${2:?}; shift 2 ;;
    --verbose) verbose=1; shift ;;
    --impair | --seed) hub_args+=("$1" "${2:?}"); shift 2 ;;
    -h | --help) usage ;;
    *) echo "cluster.sh: unknown argument $1" >&2; usage ;;
  esac
done
read -r -a suites <<<"$nodes"
n=${#suites[@]}
if [ "$n" -lt 2 ] || [ "$n" -gt 4 ]; then die "--nodes wants 2 to 4 suites, got '$nodes'"; fi
[ -n "$payload" ] || usage
[ -f "$payload/guest-tests.sh" ] || die "payload $payload has no guest-tests.sh"
for v in "$tmo" "$mem" "$smp"; do
  case $v in '' | *[!0-9]*) die "--timeout, --memory and --smp want numbers" ;; esac
done

ensure_host_tools
t0=$(date +%s)
declare -A imgdir=() initrd=()
for s in "${suites[@]}"; do
  [ -z "${imgdir[$s]:-}" ] || continue
  imgdir[$s]=$("$vm_here/build-image.sh" "$s")
  [ -f "${imgdir[$s]}/done" ] || die "no image for $s"
  touch "${imgdir[$s]}"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmadl-cluster.XXXXXX")
hub_pid=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local f
  for f in "$tmp"/qemu.*.pid; do [ ! -f "$f" ] || kill "$(cat "$f")" 2>/dev/null || true; done
  [ -z "$hub_pid" ] || kill "$hub_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The hub, compiled once per source version.
hub_src=$vm_here/hub.c
hub=$vmcache/bin/hub-$(sha256sum "$hub_src" | cut -c1-16)
if [ ! -x "$hub" ]; then
  mkdir -p "$vmcache/bin"
  cc -O2 -Wall -Wextra -Werror -o "$hub.new.$$" "$hub_src" || die "cannot build $hub_src"
  mv "$hub.new.$$" "$hub"
fi

# One initrd per suite: its base image plus the payload with the suite's libraries.
for s in "${suites[@]}"; do
  [ -z "${initrd[$s]:-}" ] || continue
  st=$tmp/stage-$s
  mkdir -p "$st/payload"
  cp -a "$payload/." "$st/payload/"
  payload_cpio "$s" "${imgdir[$s]}" "$st" "$tmp/payload-$s.cpio"
  cat "${imgdir[$s]}/base.cpio" "$tmp/payload-$s.cpio" >"$tmp/initrd-$s"
  rm -rf "$st" "$tmp/payload-$s.cpio"
  initrd[$s]=$tmp/initrd-$s
done

vm_accel "$smp"
# no_timer_check: with 4 guests on 2 loaded cores, the kernel's early check
# that the IO-APIC timer ticks sometimes failed ("IO-APIC + timer doesn't
# work!", a panic 0.08 s into the boot); QEMU's timer is fine, the check's
# busy-wait was only starved.
append="console=ttyS0 panic=-1 oops=panic mitigations=off no_timer_check"
[ $verbose = 1 ] || append+=" quiet"
append+=" rdmadl.cluster=$(IFS=,; echo "${suites[*]}")"
if [ -z "$logdir" ]; then
  logdir=$vmcache/logs/cluster-$(date +%Y%m%d-%H%M%S)-$$
  find "$vmcache/logs" -mindepth 1 -maxdepth 1 -mtime +7 -exec rm -rf {} + 2>/dev/null || true
fi
mkdir -p "$logdir"
rm -f "$logdir"/node*.log "$logdir/checks" "$logdir/nodes"

# boot_node I: one QEMU, its console to node I's file (and stdout, prefixed).
# virtio-net with event_idx=off: once, two QEMUs stopped taking frames from
# the hub for minutes while their guests were alive and idle (an RX stall;
# QEMU has had such races in virtio-net's event-index notification), so the
# older, simpler notification scheme is used.
# "RDMADL-HOST-KILL J" from any node's console kills node J's QEMU at once:
# the way a test makes a peer die mid-transfer. Node J then counts as killed
# on request, not as failed.
boot_node() {
  local i=$1 s=${suites[$1]} line j kernel
  kernel=${imgdir[$s]}/vmlinux
  [ -f "$kernel" ] && [ "${RDMADL_VM_PVH:-1}" = 1 ] || kernel=${imgdir[$s]}/vmlinuz
  set +e
  timeout -k 10 "$tmo" qemu-system-x86_64 -nodefaults -no-user-config -machine pc "${accel_args[@]}" \
    -m "$mem" -display none -monitor none -serial stdio -no-reboot \
    -netdev "dgram,id=net0,local.type=unix,local.path=$tmp/n$i.sock,remote.type=unix,remote.path=$tmp/hub.sock" \
    -device "virtio-net-pci,netdev=net0,mac=$(printf '52:54:00:c0:02:%02x' $((10 + i))),romfile=,event_idx=off" \
    -kernel "$kernel" -initrd "${initrd[$s]}" -append "$append rdmadl.node=$i" \
    -pidfile "$tmp/qemu.$i.pid" </dev/null 2>&1 |
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line%$'\r'}
      printf '%s\n' "$line" >>"$tmp/console.$i"
      printf 'n%s| %s\n' "$i" "$line"
      case $line in
        "RDMADL-HOST-KILL "*)
          j=${line#RDMADL-HOST-KILL }
          if [[ $j =~ ^[0-9]$ ]] && [ "$j" -lt "$n" ] && [ -f "$tmp/qemu.$j.pid" ]; then
            touch "$tmp/killed.$j"
            kill -KILL "$(cat "$tmp/qemu.$j.pid")" 2>/dev/null
            echo "cluster.sh: node $i asked for node $j's death: its QEMU is killed" | tee -a "$tmp/console.$j"
          fi ;;
      esac
    done
  echo "${PIPESTATUS[0]}" >"$tmp/qrc.$i"
}

boot_all() { # ATTEMPT
  local i pids=()
  rm -f "$tmp"/qemu.*.pid "$tmp"/qrc.* "$tmp"/killed.* "$tmp"/console.* "$tmp"/n*.sock "$tmp/early-kill"
  for i in $(seq 0 $((n - 1))); do : >"$tmp/console.$i"; done
  local socks=()
  for i in $(seq 0 $((n - 1))); do socks+=("$tmp/n$i.sock"); done
  "$hub" "${hub_args[@]}" "$tmp/hub.sock" "${socks[@]}" 2>"$tmp/hub.log" &
  hub_pid=$!
  if [ ${#hub_args[@]} != 0 ]; then # a bad --impair: the hub ends at once
    sleep 0.3
    kill -0 "$hub_pid" 2>/dev/null || die "the hub did not start: $(cat "$tmp/hub.log")"
  fi
  echo "cluster.sh: booting ${suites[*]} ($accel, -smp $smp, ${mem} MiB each, attempt $1, timeout ${tmo}s)"
  for i in $(seq 0 $((n - 1))); do
    boot_node "$i" &
    pids+=($!)
  done
  # A node that never reaches /init (early Oops or stall) stops the whole run:
  # the others would only wait for it. Looked at every second, so a node
  # whose QEMU has already ended (a panic) does not cost the whole deadline.
  (
    trap 'exit 0' TERM
    for ((t = 0; t < ${RDMADL_VM_BOOT_DEADLINE:-60}; t++)); do
      sleep 1
      local all=1 dead=0 k
      for ((k = 0; k < n; k++)); do
        grep -q '^RDMADL-GUEST-START' "$tmp/console.$k" && continue
        all=0
        [ ! -f "$tmp/qrc.$k" ] || dead=1
      done
      [ $all = 0 ] || exit 0
      [ $dead = 1 ] && break
    done
    touch "$tmp/early-kill"
    for f in "$tmp"/qemu.*.pid; do kill "$(cat "$f")" 2>/dev/null; done
  ) &
  local watchdog=$!
  wait "${pids[@]}" || true
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  kill "$hub_pid" 2>/dev/null || true
  wait "$hub_pid" 2>/dev/null || true
  hub_pid=""
}

# Every QEMU slot of the machine (lib.sh, vm_lock_all), held for the whole
# cluster run: its nodes already share the cores.
vm_lock_all
t1=$(date +%s)
boot_all 1
started=1
for i in $(seq 0 $((n - 1))); do grep -q '^RDMADL-GUEST-START' "$tmp/console.$i" || started=0; done
if [ $started = 0 ]; then
  echo "cluster.sh: a node died before /init started; retrying the cluster once"
  boot_all 2
fi
t2=$(date +%s)
vm_unlock

# --- per node: status; the checks, merged -------------------------------------
rc=0
: >"$logdir/checks"
for i in $(seq 0 $((n - 1))); do
  s=${suites[$i]}
  cp "$tmp/console.$i" "$logdir/node$i-$s.log"
  rel=$(sed -n 's/^RDMA_CORE=//p' "${imgdir[$s]}/info")
  status=$(sed -n 's/^RDMADL-GUEST-EXIT \([0-9]\{1,3\}\)$/\1/p' "$tmp/console.$i" | tail -n 1)
  qrc=$(cat "$tmp/qrc.$i" 2>/dev/null || echo '?')
  if [ -n "$status" ]; then
    what="exit $status"; [ "$status" = 0 ] || { [ "$rc" != 0 ] || rc=$status; }
  elif [ -f "$tmp/killed.$i" ]; then
    what="killed on request"
  elif [ -f "$tmp/early-kill" ] && ! grep -q '^RDMADL-GUEST-START' "$tmp/console.$i"; then
    what="FAILED: did not reach /init within ${RDMADL_VM_BOOT_DEADLINE:-60}s"; rc=125
  elif [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    what="FAILED: hung, killed after the ${tmo}s timeout"; rc=124
  else
    what="FAILED: died without a RDMADL-GUEST-EXIT line (qemu status $qrc)"; rc=125
  fi
  echo "$i $s ${rel:-none} $what" >>"$logdir/nodes"
  awk -v i="$i" '/^RDMADL-CHECK [^ ]+ (PASS|FAIL|UNSUPPORTED)$/ {print "node" i, $2, $3}' \
    "$tmp/console.$i" >>"$logdir/checks"
  echo "cluster.sh: node $i $s (rdma-core ${rel:-none}, 192.0.2.$((10 + i))): $what"
done
cp "$tmp/hub.log" "$logdir/hub.log" 2>/dev/null || true
[ ${#hub_args[@]} = 0 ] || grep -h '^hub: impair' "$logdir/hub.log" 2>/dev/null | sed 's/^/cluster.sh: /' || true
echo "cluster.sh: ${suites[*]}: images $((t1 - t0))s, boot+tests $((t2 - t1))s; logs: $logdir"
exit "$rc"
