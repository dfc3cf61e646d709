#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/loader/hide-rdma-core.sh CMD [ARG...]: runs CMD as on a machine without
# rdma-core, on a host that has it: in a private mount namespace, every
# directory the dynamic linker searches has libibverbs.so* and librdmacm.so*
# hidden (an overlay with whiteouts), /etc/ld.so.cache is rebuilt without them
# and LD_LIBRARY_PATH is unset. So a dlopen("libibverbs.so.1") fails after
# glibc's whole search, as it does there; nothing outside the namespace sees a
# change. Needs root (mount namespaces and overlayfs); exits 3 when it cannot
# set this up, and then runs nothing. `hide-rdma-core.sh true` is the probe.
set -euo pipefail
if [ "${RDMADL_HIDDEN_NS:-}" != 1 ]; then
  [ "$(id -u)" = 0 ] || { echo "hide-rdma-core.sh: needs root" >&2; exit 3; }
  command -v unshare >/dev/null || { echo "hide-rdma-core.sh: no unshare" >&2; exit 3; }
  RDMADL_HIDDEN_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
unset RDMADL_HIDDEN_NS LD_LIBRARY_PATH
fail() { echo "hide-rdma-core.sh: $*" >&2; exit 3; }
tmp=$(mktemp -d)
mounted=()
cleanup() { # the mounts die with the namespace; unmounted first to free $tmp
  local m
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# The directories to search: where the cache says the libraries are, and
# glibc's default ones (with their glibc-hwcaps subdirectories).
dirs=$( { ldconfig -p | sed -n 's/^[[:space:]]*lib\(ibverbs\|rdmacm\)\.so.* => \(.*\)\/[^/]*$/\2/p'
          for d in /lib /usr/lib /lib64 /usr/lib64 /lib/*-linux-gnu /usr/lib/*-linux-gnu; do
            [ -d "$d" ] && echo "$d" && ls -d "$d"/glibc-hwcaps/* 2>/dev/null || true
          done; } | while read -r d; do realpath -e "$d" 2>/dev/null || true; done | sort -u)
n=0
for d in $dirs; do
  names=$(cd "$d" && ls -d libibverbs.so* librdmacm.so* 2>/dev/null || true)
  [ -n "$names" ] || continue
  n=$((n + 1))
  mkdir -p "$tmp/$n/up" "$tmp/$n/work"
  for f in $names; do mknod "$tmp/$n/up/$f" c 0 0 || fail "mknod in $tmp"; done
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$tmp/$n/up,workdir=$tmp/$n/work" "$d" ||
    fail "overlay on $d"
  mounted=("$d" "${mounted[@]}")
done
ldconfig -X -C "$tmp/ld.so.cache" 2>/dev/null || fail "ldconfig"
mount --bind "$tmp/ld.so.cache" /etc/ld.so.cache || fail "bind mount of /etc/ld.so.cache"
mounted=(/etc/ld.so.cache "${mounted[@]}")
if ldconfig -p | grep -Eq 'lib(ibverbs|rdmacm)\.so'; then fail "still in the cache"; fi
rc=0
"$@" || rc=$?
exit $rc
