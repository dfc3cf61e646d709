# SPDX-License-Identifier: MIT
# The cross-node test plan of a cluster run and the checks each side owes
# (sourced by ci/test-vm.sh; the guest side is cluster-tests.sh).
# shellcheck shell=bash

# cluster_plan SUITE...: plan lines "ID KIND SERVER CLIENT PORT" for nodes
# 0..N-1 running SUITE 0..N-1 ("none": no rdma-core).
#  - every pair of RDMA nodes, in round-robin rounds (with 4 nodes two pairs
#    run at once): Debian's ibv_rc_pingpong and rping, rc_ops and cm_pingpong
#    in both directions, the C++ ping-pong and write/read examples;
#  - when a node has no rdma-core (and node 0 has):
#    optional_rdma from node 0 to every other node:
#    RDMA to an RDMA node, TCP to a node without rdma-core, TCP to the first
#    RDMA peer when that runs with RDMADL_DISABLE=1;
#  - last, node 0 sends to the first RDMA peer, which the host then kills.
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
    done
    # Rotate all but the first.
    a=("${a[0]}" "${a[$((m - 1))]}" "${a[@]:1:$((m - 2))}")
  done
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
  [ -z "$first" ] || emit peer_death peer_death "$first" 0
}

# cluster_owed KIND ROLE: the checks (without the "ID:" prefix) that side
# must report; none for a server of peer_death (it is killed).
cluster_owed() {
  case $1.$2 in
    tools.*) echo "ibv_rc_pingpong.$2 rping.$2" ;;
    rc.*) echo "rc.connect rc.send_recv rc.send_imm rc.write rc.write_imm rc.read" \
      "rc.atomic_fetch_add rc.atomic_cmp_swap rc.batch_poll rc_ops.exit" ;;
    cm.server) echo "cm.listen cm.private_data.client_to_server cm.accept cm.established.server" \
      "cm.send_recv cm.disconnected.server cm_pingpong.exit" ;;
    cm.client) echo "cm.resolve_addr cm.resolve_route cm.private_data.server_to_client cm.connect" \
      "cm.send cm.disconnect cm_pingpong.exit" ;;
    pingpong.*) echo "pingpong.exit" ;;
    write_read.*) echo "write_read.exit" ;;
    optional_rdma.*) echo "optional_rdma.exit transport.rdma checksum" ;;
    optional_tcp.* | optional_disabled.*) echo "optional_rdma.exit transport.tcp checksum" ;;
    peer_death.client) echo "peer_lost.exit3 peer_lost.reported" ;;
    peer_death.server) ;;
    *) echo "unknown-kind-$1" ;;
  esac
}
