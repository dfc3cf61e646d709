#!/bin/sh
# SPDX-License-Identifier: MIT
# /init of the rdmadl test VM (busybox sh, PID 1). Sets up Soft-RoCE (rxe0 on
# dummy0, 192.0.2.1), runs /payload/guest-tests.sh, prints
# "RDMADL-GUEST-EXIT <status>" as its last line and powers off. The host decides
# pass/fail from that line only.
# Cluster node (ci/vm/cluster.sh: "rdmadl.node=I rdmadl.cluster=S0,S1,..." on
# the kernel command line): the NIC is virtio-net (eth0) with 192.0.2.(10+I)/24,
# and rxe0 sits on it instead of on dummy0.
export PATH=/payload/bin:/usr/sbin:/usr/bin HOME=/root TMPDIR=/tmp LANG=C.UTF-8 LC_ALL=C
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
# shellcheck disable=SC1091 # written by build-image.sh
. /etc/rdmadl-image
# The host retries a boot once if this line never came (early kernel death).
echo "RDMADL-GUEST-START suite=$SUITE kernel=$KERNEL glibc=$GLIBC rdma-core=${RDMA_CORE:-none} up=$(cut -d' ' -f1 /proc/uptime)s"

finish() {
  echo
  echo "RDMADL-GUEST-EXIT $1"
  # The serial driver drains its buffer by interrupt: give it a moment before
  # the power goes, or the last line may be lost.
  sync
  sleep 0.2
  poweroff -f
  sleep 10
}

setup_failed() {
  echo "RDMADL-GUEST-SETUP-FAILED $*"
  dmesg | tail -n 30
  finish 99
}

# shellcheck disable=SC3045 # busybox ash has ulimit -l/-c
ulimit -l unlimited || setup_failed "ulimit -l unlimited"
# shellcheck disable=SC3045
ulimit -c 0
/usr/bin/busybox ip link set lo up 2>/dev/null

node="" cluster=""
# shellcheck disable=SC2013 # words, not lines
for w in $(cat /proc/cmdline); do
  case $w in
    rdmadl.node=*) node=${w#*=} ;;
    rdmadl.cluster=*) cluster=${w#*=} ;;
  esac
done
myip=192.0.2.1 netdev=dummy0
if [ -n "$node" ]; then
  for m in $NETMODULES; do
    modprobe "$m" || setup_failed "modprobe $m"
  done
  netdev=""
  n=0
  while [ -z "$netdev" ] && [ $n -lt 100 ]; do
    for d in /sys/class/net/*; do
      case ${d##*/} in lo | dummy*) ;; *) netdev=${d##*/} ;; esac
    done
    [ -n "$netdev" ] || sleep 0.1
    n=$((n + 1))
  done
  [ -n "$netdev" ] || setup_failed "no NIC after modprobe $NETMODULES"
  myip=192.0.2.$((10 + node))
  /usr/bin/busybox ip addr add "$myip/24" dev "$netdev" || setup_failed "ip addr add $myip"
  /usr/bin/busybox ip link set "$netdev" up || setup_failed "ip link set $netdev up"
  RDMADL_CLUSTER=$(echo "$cluster" | tr ',' ' ')
  export RDMADL_NODE="$node" RDMADL_NODE_IP="$myip" RDMADL_CLUSTER
  echo "RDMADL-GUEST-NODE node=$node ip=$myip netdev=$netdev cluster=$cluster"
fi

if [ "$HAVE_RDMA" = 1 ]; then
  # Lets "rdma link add ... type rxe" autoload what it needs.
  echo /usr/bin/modprobe >/proc/sys/kernel/modprobe
  # numdummies=0: dummy would otherwise create dummy0 itself.
  modprobe dummy numdummies=0 || setup_failed "modprobe dummy"
  for m in $MODULES; do
    modprobe "$m" || setup_failed "modprobe $m"
  done
  # busybox runs its own "ip" applet before PATH: call iproute2's by path.
  for ip in /usr/sbin/ip /usr/bin/ip; do [ -x "$ip" ] && break; done
  for rdma in /usr/sbin/rdma /usr/bin/rdma; do [ -x "$rdma" ] && break; done
  if [ -z "$node" ]; then
    # rdma_cm needs a netdev with an address (rxe on lo runs verbs only).
    # modprobe dummy may already have made dummy0 (numdummies defaults to 1).
    [ -e /sys/class/net/dummy0 ] || "$ip" link add dummy0 type dummy || setup_failed "ip link add dummy0"
    "$ip" addr add 192.0.2.1/24 dev dummy0 || setup_failed "ip addr add"
    "$ip" link set dummy0 up || setup_failed "ip link set dummy0 up"
  fi
  "$rdma" link add rxe0 type rxe netdev "$netdev" || setup_failed "rdma link add rxe0 on $netdev"
  # The GID table fills asynchronously. One grep over the directory: reading
  # 1024 entries one file at a time costs seconds under TCG.
  port=/sys/class/infiniband/rxe0/ports/1
  gidhex=$(printf 'c000:02%02x' "${myip##*.}")
  gid=
  n=0
  while [ -z "$gid" ] && [ $n -lt 300 ]; do
    # shellcheck disable=SC2013 # sysfs names have no blanks
    for f in $(grep -ls "^0000:0000:0000:0000:0000:ffff:$gidhex\$" "$port"/gids/* 2>/dev/null); do
      i=${f##*/}
      if [ "$(cat "$port/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ]; then gid=$i; break; fi
    done
    [ -n "$gid" ] || sleep 0.1
    n=$((n + 1))
  done
  [ -n "$gid" ] || setup_failed "no RoCE v2 GID for $myip on rxe0 after 30 s"
  export RDMADL_TEST_DEVICE=rxe0 RDMADL_TEST_IP="$myip" RDMADL_TEST_GID_INDEX="$gid"
  echo "RDMADL-GUEST-RXE device=rxe0 ip=$myip netdev=$netdev gid_index=$gid up=$(cut -d' ' -f1 /proc/uptime)s"
fi
export RDMADL_SUITE="$SUITE"
[ ! -d /payload/lib ] || export LD_LIBRARY_PATH=/payload/lib

cd /payload || setup_failed "no /payload"
if [ -f /payload/guest-tests.sh ]; then
  /bin/sh /payload/guest-tests.sh </dev/null
  status=$?
else
  echo "RDMADL-GUEST-SETUP-FAILED no /payload/guest-tests.sh"
  status=127
fi
if [ "$status" -ne 0 ]; then
  echo "--- guest dmesg (last 30 lines) ---"
  dmesg | tail -n 30
fi
finish "$status"
