# SPDX-License-Identifier: MIT
# The C++ API's checks in the Soft-RoCE VM tier. ci/test-vm.sh appends these
# lines to the generated /payload/guest-tests.sh (busybox sh, after its run /
# check helpers) and copies each program named here from build/tests/cxx or
# build/examples into /payload/bin. Every line prints
# "RDMADL-CHECK cxx-<name> PASS|FAIL".
# cxx-info-verdict: rdmadl-info's "usable:" line is the loader's verdict, as
# the drop-in program loader_diag reads it (rdmadl_verdict_state).
info_line=$(rdmadl-info-guest | grep '^usable: ')
diag_line=$(loader_diag --usable-line)
echo "rdmadl-info: $info_line"
echo "loader_diag: $diag_line"
check cxx-info-verdict $([ -n "$info_line" ] && [ "$info_line" = "$diag_line" ] && echo 0 || echo 1)
cxx_checks="peer-exit probe device gid-select memory-bounds rc-send-recv uc-send-recv send-imm
  write-imm write-read dmabuf atomics ud-send-recv srq batch-poll comp-channel send-batch
  send-batch-chained endpoint peer-mismatch lifetimes batch-guard prepared poll-session waits-saturate multi-channel mixed-posts
  cm-connect cm-reject cm-ack-timeout cm-multi-channel cm-accept-deadline cm-mesh async-events"
if [ "$RDMADL_SUITE" = none ]; then
  run cxx-absent rdmadl-cxx-device-test --absent
  rdmadl-info-guest --check
  check cxx-info-absent $([ $? -eq 1 ] && echo 0 || echo 1)
else
  ulimit -l unlimited 2>/dev/null
  for c in $cxx_checks; do
    run "cxx-$c" rdmadl-cxx-device-test "$c"
  done
  rdmadl-info-guest >/tmp/cxx-info.txt
  check cxx-info-usable $?
  rdmadl-info-guest --json >/tmp/cxx-info.json && grep -q '"RoCE v2"' /tmp/cxx-info.json
  check cxx-info-json $?
  cat /tmp/cxx-info.txt
  run cxx-example-write-read rdmadl-example-write-read
  run cxx-example-pingpong rdmadl-example-pingpong "$RDMADL_TEST_IP"
  run cxx-example-multi-peer rdmadl-example-multi-peer
  run cxx-example-multi-peer-cm rdmadl-example-multi-peer --cm "$RDMADL_TEST_IP"
fi
