#!/bin/sh
# SPDX-License-Identifier: MIT
# Debian's own RDMA tools over Soft-RoCE in the test VM, so an rdmadl failure
# can be told apart from a broken VM: the whole payload of ci/vm/run.sh
# --baseline (as its guest-tests.sh), and the first checks single.sh runs.
# Runs under busybox sh; prints "RDMADL-CHECK <prefix><name> PASS|FAIL" per
# check and exits non-zero if one failed.
#
#   baseline.sh [--prefix PREFIX] [--no-perftest]
#
# --no-perftest leaves out Debian's perftest programs (single.sh runs
# perftest built against rdmadl instead).
prefix="" with_perftest=1
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --no-perftest) with_perftest=0; shift ;;
    *) echo "baseline.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
passed=0 failed=0
out=/tmp/baseline
mkdir -p "$out"

result() { # NAME OK
  if [ "$2" = 0 ]; then
    echo "RDMADL-CHECK $prefix$1 PASS"; passed=$((passed + 1))
  else
    echo "RDMADL-CHECK $prefix$1 FAIL"; failed=$((failed + 1))
  fi
}

show() { # FILE...: a failed check's output, indented
  for f in "$@"; do echo "--- $f"; sed 's/^/  /' "$f"; done
}

# wait_listen PORT: until a TCP socket listens on PORT (perftest and the
# pingpongs exchange QP numbers over TCP; a client started too early fails).
wait_listen() {
  hex=$(printf ':%04X ' "$1") n=0
  while [ $n -lt 100 ]; do
    grep -q "$hex.* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.1; n=$((n + 1))
  done
  return 1
}

# pair NAME PORT SERVER-CMD... -- CLIENT-CMD...: run a server in the
# background and a client against it; both must succeed. PORT 0: no TCP port
# to wait for (rdma_cm), the client is retried instead.
pair() {
  name=$1 port=$2; shift 2
  srv="" cli=""
  while [ "$1" != -- ]; do srv="$srv $1"; shift; done
  shift
  cli="$*"
  # shellcheck disable=SC2086 # word splitting of the command lines is wanted
  timeout 120 $srv >"$out/$name.server" 2>&1 &
  spid=$!
  ok=0
  if [ "$port" != 0 ]; then
    wait_listen "$port" || { echo "$name: server did not listen on $port"; ok=1; }
    # shellcheck disable=SC2086
    [ $ok != 0 ] || timeout 120 $cli >"$out/$name.client" 2>&1 || ok=$?
  else
    tries=0
    while :; do
      sleep 0.5
      # shellcheck disable=SC2086
      timeout 120 $cli >"$out/$name.client" 2>&1 && { ok=0; break; }
      ok=$?; tries=$((tries + 1))
      [ $tries -lt 5 ] || break
    done
  fi
  wait "$spid"
  src=$?
  [ $ok != 0 ] || ok=$src
  [ $ok = 0 ] || show "$out/$name.server" "$out/$name.client"
  return $ok
}

echo "baseline: suite=$RDMADL_SUITE device=${RDMADL_TEST_DEVICE:-} gid_index=${RDMADL_TEST_GID_INDEX:-}"

if [ "$RDMADL_SUITE" = none ]; then
  # The "fresh node without RDMA" image: nothing of rdma-core may be there.
  found=$(find / -xdev \( -name 'libibverbs*' -o -name 'librdmacm*' -o -name '*rdmav*.so' \) 2>/dev/null)
  [ -z "$found" ] || echo "found: $found"
  result no-rdma-core "$(if [ -z "$found" ]; then echo 0; else echo 1; fi)"
  [ ! -e /sys/class/infiniband ] || ls /sys/class/infiniband
  result no-rdma-devices "$(if [ ! -d /sys/class/infiniband ] || [ -z "$(ls /sys/class/infiniband)" ]; then echo 0; else echo 1; fi)"
else
  dev=$RDMADL_TEST_DEVICE gid=$RDMADL_TEST_GID_INDEX ip=$RDMADL_TEST_IP

  ibv_devinfo -d "$dev" -v >"$out/devinfo" 2>&1
  rc=$?
  grep -q 'state:.*PORT_ACTIVE' "$out/devinfo" || rc=1
  # ibv_devinfo prints each GID's type from rdma-core 31 on; before (28.0:
  # the rc28 suite) the test GID's type comes from sysfs, as the kernel says it.
  if grep -q 'GID\[.*\]:.*, *\(IB\|RoCE\)' "$out/devinfo"; then
    grep -q 'RoCE v2' "$out/devinfo" || rc=1
  else
    t=$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$gid" 2>/dev/null)
    echo "  GID $gid type (sysfs; this ibv_devinfo prints no GID types): ${t:-none}"
    [ "$t" = "RoCE v2" ] || rc=1
  fi
  [ $rc = 0 ] || show "$out/devinfo"
  grep -E 'hca_id|transport|fw_ver|state:' "$out/devinfo" | sed 's/^[[:space:]]*/  /'
  result ibv_devinfo $rc

  pair ibv_rc_pingpong 18515 \
    ibv_rc_pingpong -d "$dev" -g "$gid" -p 18515 -n 200 -- \
    ibv_rc_pingpong -d "$dev" -g "$gid" -p 18515 -n 200 127.0.0.1
  rc=$?
  [ $rc != 0 ] || grep -h 'iters in' "$out/ibv_rc_pingpong.client" | sed 's/^/  /'
  result ibv_rc_pingpong $rc

  # rping -v prints each verified ping; the client must have seen all 10.
  pair rping 0 \
    rping -s -a "$ip" -v -C 10 -- \
    rping -c -a "$ip" -v -C 10
  rc=$?
  [ $rc != 0 ] || [ "$(grep -c 'ping data: rdma-ping-' "$out/rping.client")" = 10 ] || {
    rc=1; show "$out/rping.client"
  }
  result rping $rc

  # perftest PROGRAM PORT: server and client of one perftest program, 500
  # iterations; shows its result rows. -F: no CPU-frequency check
  # (meaningless in a VM).
  perftest() {
    pair "$1" "$2" \
      "$1" -d "$dev" -x "$gid" -p "$2" -F -n 500 -- \
      "$1" -d "$dev" -x "$gid" -p "$2" -F -n 500 127.0.0.1
    rc=$?
    [ $rc != 0 ] || grep -E '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+' "$out/$1.client" | sed 's/^/  /'
    result "$1" $rc
  }
  if [ $with_perftest = 1 ]; then
    perftest ib_send_lat 18516
    perftest ib_write_bw 18517
  fi
fi

echo "RDMADL-BASELINE suite=$RDMADL_SUITE passed=$passed failed=$failed"
[ "$failed" = 0 ]
