#!/bin/sh
# SPDX-License-Identifier: MIT
# The Soft-RoCE tier's guest side, one VM (busybox sh): ci/test-vm.sh copies
# tests/guest/ into /payload/guest and boots /payload/guest-tests.sh, which
# runs this. Every check prints "RDMADL-CHECK <name> PASS|FAIL|UNSUPPORTED";
# the host decides. A program that exits non-zero also prints
# "<prog>.exit FAIL". RDMADL_SUITE is the image's suite ("none": no
# rdma-core); guest-init.sh sets it and RDMADL_TEST_{DEVICE,GID_INDEX,IP}.
guest=/payload/guest
status=0
step() {
  echo "RDMADL-STEP $* up=$(cut -d' ' -f1 /proc/uptime)s"
}
# run NAME CMD...: one program, killed after $run_limit s (120 unless a
# check sets more).
run_limit=120
run() {
  name=$1
  shift
  step "$name"
  timeout "$run_limit" "$@"
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
# The programs programs.txt has this script run by itself ("single" payload,
# RUN auto), with their arguments: "NAME ARGUMENTS..." per line.
awk '!/^#/ && NF && $4 == "auto" && index("," $3 ",", ",single,") {
  $2 = $3 = $4 = ""; print }' "$guest/programs.txt" >/tmp/auto.lines

if [ "$RDMADL_SUITE" = none ]; then
  # No rdma-core at all and no override variable: clean EOPNOTSUPP failures.
  while read -r p _; do
    run "$p" "$p" --absent </dev/null
  done </tmp/auto.lines
  run_shared --absent
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
  sh "$guest/baseline.sh" --prefix baseline. --no-perftest || status=1
  # rdmadl's drop-in programs, and librdmadl-ffi through dlopen/dlsym.
  while read -r p args; do
    eval "run \"\$p\" \"\$p\" $args" </dev/null
  done </tmp/auto.lines
  run_shared
  # librdmadl-ffi from Python's ctypes.
  py=$(ls /usr/bin/python3.* 2>/dev/null | head -n 1)
  if [ -n "$py" ]; then
    run ffi_pingpong "$py" -S /payload/bin/ffi_pingpong.py
  else
    echo "no python3 in the image" >&2
    check ffi_pingpong.python 1
  fi
fi
# The C++ API's programs, then perftest built against the drop-in.
# shellcheck source=tests/guest/cxx.sh
. "$guest/cxx.sh"
# shellcheck source=tests/guest/perftest.sh
. "$guest/perftest.sh"
exit $status
