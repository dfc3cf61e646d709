# SPDX-License-Identifier: MIT
# Sourced by run-vm-tcp.sh and trace-vm-tcp.sh: what both do around their
# guest script. bench/cxx/vm-tcp-lib.sh sets root (the checkout) and payload
# (a directory, removed on exit, holding bin/rdmadl-bench-tcp-host built from
# BUILD_DIR); the caller then writes $payload/guest-tests.sh and calls
# boot_two_none LOGDIR, which boots two `none` nodes on one segment of
# ci/vm/cluster.sh (no rdma-core in them), runs it in both and sets rc.
tcp_payload() { # BUILD_DIR
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  ninja -C "$1" -j2 rdmadl-bench-tcp-host >/dev/null
  payload=$(mktemp -d)
  trap 'rm -rf "$payload"' EXIT
  mkdir -p "$payload/bin"
  cp "$1/bench/cxx/rdmadl-bench-tcp-host" "$payload/bin/"
}
boot_two_none() { # LOGDIR
  echo "host: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  set +e
  "$root/ci/vm/cluster.sh" --nodes "none none" --payload "$payload" --timeout 900 \
    --log-dir "$1" >/dev/null
  rc=$?
  set -e
  echo "host: load after: $(cut -d' ' -f1-3 /proc/loadavg); cluster exit $rc; logs $1"
}
