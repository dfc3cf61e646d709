# SPDX-License-Identifier: MIT
# The cross-node test plan of a cluster run and the checks each side owes
# (sourced by ci/test-vm.sh; the guest side is cluster-tests.sh).
# shellcheck shell=bash

# cluster_plan SUITE...: plan lines "ID KIND SERVER CLIENT PORT" for nodes
# 0..N-1 running SUITE 0..N-1 ("none": no rdma-core). Kinds mc, mca and mcm
# name three nodes: SERVER is "R0,R1,R2" (ranks 0 to 2; rank 2 is killed,
# but for mcm), CLIENT "-".
# Every test has ports PORT to PORT+9 to itself.
#  - every pair of RDMA nodes, in round-robin rounds (with 4 nodes two pairs
#    run at once): Debian's ibv_rc_pingpong and rping, rc_ops and cm_pingpong
#    in both directions, the C++ ping-pong and write/read examples; the pair
#    of nodes 0 and 1 (the entry's first two suites: e.g. 65.0 and 28.0) also
#    runs the tools and the two examples the other way round, so that pair
#    runs every pair test in both directions;
#  - with 4 RDMA nodes: a multi_channel over nodes 0, 1, 2 (scatter/gather,
#    multicast, write/read; then node 2 is killed mid-scope), then node 3
#    sends to node 0 and the host kills node 3 (the receiver survives);
#  - when a node has no rdma-core (and node 0 has):
#    optional_rdma from node 0 to every other node:
#    RDMA to an RDMA node, TCP to a node without rdma-core, TCP to the first
#    RDMA peer when that runs with RDMADL_DISABLE=1;
#    then a multi_channel with channel_transport::automatic built with
#    create_cm (kind mcm: a TCP rendezvous per pair, then rdma_cm between
#    the first two, TCP with the third; no kill) over node 0, the first
#    RDMA peer and the first node without rdma-core; then the same three
#    with blobs (kind mca, as mc), the node without rdma-core killed
#    mid-scope: RDMA between the first two, TCP with the third;
#    last, node 0 sends to the first RDMA peer, which the host then kills
#    (the sender survives).
cluster_plan() {
  local -a s=("$@") rn=() a=()
  local i j k n=$# port=18600 first="" x
  for ((i = 0; i < n; i++)); do [ "${s[$i]}" = none ] || rn+=("$i"); done
  emit() { echo "$1.n$3-n$4 $2 $3 $4 $port"; port=$((port + 10)); }
  # Round-robin (circle method) over the RDMA nodes, with a bye when odd.
  a=("${rn[@]}")
  [ $((${#a[@]} % 2)) = 0 ] || a+=(-1)
  local m=${#a[@]}
  for ((k = 0; k < m - 1; k++)); do
    for ((x = 0; x < m / 2; x++)); do
      i=${a[$x]} j=${a[$((m - 1 - x))]}
      if [ "$i" -lt 0 ] || [ "$j" -lt 0 ]; then continue; fi
      [ "$i" -lt "$j" ] || { local t=$i; i=$j; j=$t; }
      emit tools tools "$i" "$j"
      emit rc rc "$i" "$j"
      emit rc rc "$j" "$i"
      emit cm cm "$i" "$j"
      emit cm cm "$j" "$i"
      emit pingpong pingpong "$i" "$j"
      emit write_read write_read "$j" "$i"
      if [ "$i" = "${rn[0]}" ] && [ "$j" = "${rn[1]:-}" ]; then
        emit tools tools "$j" "$i"
        emit pingpong pingpong "$j" "$i"
        emit write_read write_read "$i" "$j"
      fi
    done
    # Rotate all but the first.
    a=("${a[0]}" "${a[$((m - 1))]}" "${a[@]:1:$((m - 2))}")
  done
  if [ ${#rn[@]} -ge 4 ]; then
    echo "mc.n${rn[0]}-n${rn[1]}-n${rn[2]} mc ${rn[0]},${rn[1]},${rn[2]} - $port"
    port=$((port + 10))
    emit peer_death_rx peer_death_rx "${rn[0]}" "${rn[3]}"
  fi
  # The product case needs a node without rdma-core in the cluster.
  [[ " ${s[*]} " == *" none "* ]] && [ "${s[0]}" != none ] || return 0
  for ((j = 1; j < n; j++)); do
    if [ "${s[$j]}" = none ]; then
      emit optional optional_tcp 0 "$j"
    else
      emit optional optional_rdma 0 "$j"
      if [ -z "$first" ]; then first=$j; emit optional_disabled optional_disabled 0 "$j"; fi
    fi
  done
  # A transport-neutral multi_channel: node 0, the first other RDMA node
  # and the first node without rdma-core (killed mid-scope).
  if [ -n "$first" ]; then
    for ((j = 1; j < n; j++)); do
      [ "${s[$j]}" = none ] || continue
      echo "mcm.n0-n$first-n$j mcm 0,$first,$j - $port"
      port=$((port + 10))
      echo "mca.n0-n$first-n$j mca 0,$first,$j - $port"
      port=$((port + 10))
      break
    done
  fi
  [ -z "$first" ] || emit peer_death peer_death "$first" 0
}

# impair_plan NAME...: the plan of an impaired cluster (README.md, "Impaired
# frames"): on nodes 0 and 1, first unimpaired ("none", the baseline the
# slowdown is measured against), then under each hub profile NAME in turn
# (profile K, the K-th --impair of the hub): a switch line "impair.NAME
# impair 0 1 PORT K", then rc_ops, cm_pingpong, the C++ ping-pong, a
# multi_channel (kind mc2: cxx_mc_cluster's ranks 0 and 2 on node 0, rank 1
# on node 1, no kill) and a bulk transfer (kind bulk: 4 MiB through
# rdmadl-example-optional-rdma over RDMA, every byte in its checksum, so
# that a 1% profile drops dozens of frames, not a handful) as
# "impair.NAME.KIND.n0-n1".
#
# Profile noroce (every RoCE frame dropped, TCP untouched: a fabric that
# does not carry RDMA between the nodes) runs only kind mcfb: mc2's three
# ranks built with create_cm and transport automatic. Both nodes offer
# RDMA, so every pair chooses it in its rendezvous; rdma_cm then connects
# ranks 0 and 2 (one node: rxe loops back) and cannot connect rank 1's
# pairs across the hub, which must fall back to TCP, every byte checked.
#
# Profile nortu (every rdma_cm RTU dropped) runs cm, pingpong and mcrtu (as
# mcfb, every pair over RDMA): the passive sides must take the client's
# first message (cm_pingpong, the C++ ping-pong's prepared receive) or the
# rendezvous' word on the outcome (create_cm) as the RTU, with rdma_cm's
# resent REPs answered by RTUs that are lost again.
impair_kinds="rc cm pingpong mc2 bulk"
impair_kinds_of() {
  case $1 in
    noroce) echo mcfb ;;
    nortu) echo cm pingpong mcrtu ;;
    *) echo "$impair_kinds" ;;
  esac
}
impair_plan() {
  local port=18600 k=0 name kind
  for name in none "$@"; do
    echo "impair.$name impair 0 1 $port $k"
    port=$((port + 10)) k=$((k + 1))
    for kind in $(impair_kinds_of "$name"); do
      echo "impair.$name.$kind.n0-n1 $kind 0 1 $port"
      port=$((port + 10))
    done
  done
}

# cluster_sides KIND SERVER CLIENT: "NODE ROLE" per node taking part.
cluster_sides() {
  local i=0 r
  case $1 in
    mc | mca | mcm) for r in ${2//,/ }; do echo "$r rank$i"; i=$((i + 1)); done ;;
    *) echo "$2 server"; echo "$3 client" ;;
  esac
}

# cluster_killed KIND SERVER CLIENT: the node the host kills on request in
# that test, if any.
cluster_killed() {
  case $1 in
    peer_death) echo "$2" ;;
    peer_death_rx) echo "$3" ;;
    mc | mca) echo "${2##*,}" ;;
  esac
}

# cluster_owed KIND ROLE: the checks (without the "ID:" prefix) that side
# must report. The survivor of a peer death owes exit status 3 and a "peer
# lost:" line naming an error completion or a DISCONNECTED event: silence
# alone (status 4, "peer silent:") fails. A killed side owes what it can
# print before it dies.
cluster_owed() {
  case $1.$2 in
    tools.*) echo "ibv_rc_pingpong.$2 rping.$2" ;;
    rc.*) echo "rc.connect rc.send_recv rc.send_imm rc.write rc.write_imm rc.read" \
      "rc.atomic_fetch_add rc.atomic_cmp_swap rc.batch_poll rc_ops.exit" ;;
    cm.server) echo "cm.listen cm.private_data.client_to_server cm.accept cm.established.server" \
      "cm.send_recv cm.notify cm.reply.server cm.disconnected.server cm_pingpong.exit" ;;
    cm.client) echo "cm.resolve_addr cm.resolve_route cm.private_data.server_to_client cm.connect" \
      "cm.send cm.reply.client cm.disconnect cm_pingpong.exit" ;;
    pingpong.*) echo "pingpong.exit" ;;
    impair.server) echo "impair.select" ;;
    impair.client) ;;
    mc2.*) echo "mc.open mc.create mc.register mc.oob_exchange mc.handshake mc.gather_recv" \
      "mc.multicast mc.scatter_write mc.write.target mc.gather_read mc.done mc_cluster.exit" ;;&
    mc2.server) echo "mc_rank2.exit" ;;
    mc2.client) ;;
    write_read.*) echo "write_read.exit" ;;
    optional_rdma.* | bulk.*) echo "optional_rdma.exit transport.rdma checksum" ;;
    optional_tcp.* | optional_disabled.*) echo "optional_rdma.exit transport.tcp checksum" ;;
    peer_death.client | peer_death_rx.server) echo "peer_lost.exit3 peer_lost.by_transport" ;;
    peer_death.server | peer_death_rx.client) ;;
    mc.rank[012]) echo "mc.open mc.create mc.register mc.oob_exchange mc.handshake mc.gather_recv" \
      "mc.multicast mc.scatter_write mc.write.target mc.gather_read" ;;&
    mc.rank[01]) echo "mc.kill.post mc.kill.no_hang mc.kill.peer_errors mc.kill.live_peer" \
      "mc_cluster.exit" ;;&
    mc.rank0) echo "mc.kill.live_first" ;;
    mc.*) ;;
    mca.rank[012]) echo "mc.create mc.register mc.channel_endpoints mc.oob_exchange mc.handshake" \
      "mc.transport mc.gather_recv mc.multicast mc.scatter_write mc.write.target mc.gather_read" ;;&
    mca.rank[01]) echo "mc.kill.post mc.kill.no_hang mc.kill.peer_errors mc.kill.live_peer" \
      "mc_cluster.exit" ;;&
    mca.rank0) echo "mc.kill.live_first" ;;
    mca.*) ;;
    mcm.* | mcfb.* | mcrtu.*) echo "mc.listen mc.meet mc.create mc.register mc.windows" \
      "mc.transport mc.gather_recv mc.multicast mc.scatter_write mc.write.target" \
      "mc.gather_read mc.done mc_cluster.exit" ;;&
    mcfb.server | mcrtu.server) echo "mc_rank2.exit" ;;
    mcm.* | mcfb.* | mcrtu.*) ;;
    *) echo "unknown-kind-$1" ;;
  esac
}
