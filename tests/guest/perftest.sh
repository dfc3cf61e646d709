# SPDX-License-Identifier: MIT
# shellcheck shell=sh
# perftest, unmodified, in the Soft-RoCE VM tier. ci/build-perftest.sh builds
# Debian's perftest source with its own ./configure against rdmadl's link
# aliases (no NEEDED on rdma-core; librdmadl-verbs.so.0 instead);
# ci/test-vm.sh copies its programs to /payload/perftest (not bin/: Debian's
# own ib_* in the image keep their names); single.sh sources this (busybox
# sh; its step / check helpers). Each program runs as baseline.sh runs Debian's:
# server and client on the one rxe device, -F, a few hundred iterations.
# Prints "RDMADL-CHECK perftest.<program> PASS|FAIL"; on the image without
# rdma-core, "perftest.absent": the program starts, finds no device and exits
# with perftest's own error.
pt=/payload/perftest
# pt_run SECS PROGRAM ARGS...: with the libraries ci/build-perftest.sh put
# beside the programs (the build host's libpci), then the payload's (the drop-in).
pt_run() {
  secs=$1 prog=$2
  shift 2
  LD_LIBRARY_PATH=$pt/lib:/payload/lib timeout "$secs" "$pt/$prog" "$@"
}
# pt_listening PORT: a TCP socket listens on PORT (perftest exchanges its QP
# numbers over TCP; a client started before its server fails).
pt_listening() {
  hex=$(printf ':%04X ' "$1") n=0
  while [ $n -lt 100 ]; do
    grep -q "$hex.* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.1
    n=$((n + 1))
  done
  return 1
}
if [ "$RDMADL_SUITE" = none ]; then
  step perftest.absent
  pt_run 30 ib_send_bw -F -n 5 >/tmp/pt.absent 2>&1
  st=$?
  cat /tmp/pt.absent
  # 1: perftest's own failure; 127 would be a missing library, >= 124 a hang or a crash.
  check perftest.absent "$([ $st -eq 1 ] && grep -q 'Did not detect devices' /tmp/pt.absent && echo 0 || echo 1)"
else
  port=18600
  for p in ib_send_bw ib_write_bw ib_read_bw ib_send_lat; do
    step "perftest.$p"
    port=$((port + 1))
    set -- -d "$RDMADL_TEST_DEVICE" -x "$RDMADL_TEST_GID_INDEX" -p "$port" -F -n 200
    pt_run 120 "$p" "$@" >"/tmp/pt.$p.server" 2>&1 &
    spid=$!
    st=1
    if pt_listening "$port"; then
      pt_run 120 "$p" "$@" 127.0.0.1 >"/tmp/pt.$p.client" 2>&1
      st=$?
    else
      echo "perftest $p: the server never listened on $port" >"/tmp/pt.$p.client"
    fi
    wait "$spid"
    sst=$?
    [ $st -ne 0 ] || st=$sst
    # A result row: "<bytes> <iterations> ..." from the client.
    [ $st -ne 0 ] || grep -Eq '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+' "/tmp/pt.$p.client" || st=1
    if [ $st -eq 0 ]; then
      grep -E '^[[:space:]]*[0-9]+[[:space:]]+[0-9]+' "/tmp/pt.$p.client" | sed "s/^/  $p: /"
    else
      echo "--- perftest $p server:"
      cat "/tmp/pt.$p.server"
      echo "--- perftest $p client:"
      cat "/tmp/pt.$p.client"
    fi
    check "perftest.$p" $st
  done
fi
