#!/bin/sh
# SPDX-License-Identifier: MIT
# The guest side of a cluster run (ci/test-vm.sh copies it to
# /payload/guest-tests.sh; busy box sh). Every node reads the same plan,
# /payload/cluster-plan, one test per line:
#
#   ID KIND SERVER CLIENT PORT
#
# and plays its part in the tests that name it (SERVER and CLIENT are node
# numbers; the node's address is 192.0.2.(10+N); kind mc names three nodes
# "R0,R1,R2" as SERVER), in plan order. The two nodes of a test first meet
# (a TCP rendezvous on PORT+9, see meet) and only then start their programs,
# which find each other through their own TCP side channels (the client
# retries until the server listens). Every check is printed as
# "RDMADL-CHECK ID:NAME PASS|FAIL"; the host knows which ones each side owes.
me=$RDMADL_NODE
myip=$RDMADL_NODE_IP
status=0
[ -n "$me" ] || { echo "cluster-tests: not a cluster node (no RDMADL_NODE)"; exit 1; }

ip_of() { echo "192.0.2.$((10 + $1))"; }
up() { cut -d' ' -f1 /proc/uptime; }
check() { # NAME STATUS(0 = pass)
  if [ "$2" -eq 0 ]; then echo "RDMADL-CHECK $1 PASS"; else echo "RDMADL-CHECK $1 FAIL"; status=1; fi
}
show() { for f in "$@"; do echo "--- $f"; sed 's/^/  /' "$f"; done; }

# prog ID NAME CMD...: one program (killed after 240 s, or after 120 s in
# a test of an impaired cluster, "impair.*"); its own check lines get the
# prefix ID:, its exit status becomes ID:NAME.exit. Its wall time is printed
# as "RDMADL-TIME ID SECS DEADLINE".
prog() {
  id=$1 name=$2
  shift 2
  lim=240
  case $id in impair.*) lim=120 ;; esac
  t0=$(up)
  timeout $lim "$@" </dev/null >"/tmp/$id.out" 2>"/tmp/$id.err"
  st=$?
  echo "RDMADL-TIME $id $(echo "$(up) $t0" | awk '{print $1 - $2}') $lim"
  sed -n "s/^RDMADL-CHECK /RDMADL-CHECK $id:/p; s/^RDMADL-WHY /RDMADL-WHY $id:/p" "/tmp/$id.out"
  grep -v '^RDMADL-' "/tmp/$id.out"
  check "$id:$name.exit" $st
  [ $st -eq 0 ] || show "/tmp/$id.err"
}

# meet ROLE PEER_IP PORT: the two nodes of a test wait for each other, up to
# 400 s, before either starts its program. Without it, a server started as
# soon as its node was free, while its client could still be busy with
# another pair (4 nodes run two pairs at once, at their own pace): the
# server's own wait for a client then depended on how long other pairs took
# and, when it ran out, the late client met no listener (rdma_cm REJECTED,
# side channels timing out) and the pair stayed out of step from then on.
meet() {
  if [ "$1" = server ]; then
    timeout 400 nc -l -p "$3" </dev/null >/dev/null 2>&1
  else
    end=$(($(date +%s) + 400))
    until nc -w 5 "$2" "$3" </dev/null >/dev/null 2>&1; do
      [ "$(date +%s)" -lt "$end" ] || return 1
      sleep 0.3
    done
  fi
}

# survive ID VICTIM CMD...: CMD is one end of a 1 GiB optional_rdma
# transfer; once data flows (a "progress" line), the host is asked to kill
# node VICTIM, the other end. CMD must then report how the transport told it
# ("peer lost: error completion ..." or "... DISCONNECTED event ...") and
# exit with 3, within 150 s; a peer only presumed lost after 20 s of silence
# (status 4, "peer silent: ...") fails.
survive() {
  id=$1 victim=$2
  shift 2
  timeout 150 "$@" </dev/null >"/tmp/$id.out" 2>"/tmp/$id.err" &
  pid=$!
  n=0
  while [ $n -lt 600 ] && ! grep -q '^progress ' "/tmp/$id.out"; do
    sleep 0.1
    n=$((n + 1))
  done
  grep '^transport: ' "/tmp/$id.out"
  echo "RDMADL-HOST-KILL $victim"
  t0=$(up)
  wait $pid
  st=$?
  echo "cluster-tests: the survivor ended with status $st, $(echo "$(up) $t0" | awk '{print $1 - $2}') s after the kill request"
  grep -v '^progress ' "/tmp/$id.out"
  check "$id:peer_lost.exit3" "$([ $st -eq 3 ] && echo 0 || echo 1)"
  grep -qE '^peer lost: (error completion|DISCONNECTED event)' "/tmp/$id.out"
  check "$id:peer_lost.by_transport" $?
  [ $st -eq 3 ] || show "/tmp/$id.err"
}

# victim ID CMD...: the end whose QEMU the host kills; returning is a failure.
victim() {
  id=$1
  shift
  timeout 150 "$@" </dev/null >"/tmp/$id.out" 2>&1
  echo "cluster-tests: still alive after a transfer meant to be cut short"
  show "/tmp/$id.out"
  check "$id:killed" 1
}

# retry ID SECS CONTACT CMD...: a client of a server that may not listen
# yet: CMD runs again (every 0.5 s, for up to SECS) while it fails without
# having reached the server, i.e. its output does not match the ERE CONTACT.
# A client that reached the server and then failed is not run again: that
# server has finished by then. (It used to be, up to 240 times: in a whole
# .ci/run one rping client failed after its 10 pings, retried for minutes
# against a finished server (REJECTED each time) while its partner went on,
# and every side-channel wait of that pair and the next ones ran out: the
# 4-node hang.)
retry() {
  id=$1 secs=$2 contact=$3
  shift 3
  end=$(($(date +%s) + secs))
  while :; do
    timeout 60 "$@" </dev/null >"/tmp/$id.out" 2>&1 && return 0
    st=$?
    ! grep -qE "$contact" "/tmp/$id.out" || return $st
    [ "$(date +%s)" -lt "$end" ] || return $st
    sleep 0.5
  done
}

# rping_verdict ID FILE: st (rping's exit status) made 1 unless FILE shows
# its 10 pings, each verified (-v prints what came back), and st made 0 for
# one known bug of rping itself: its event thread may call
# rdma_get_cm_event() on the channel the main thread has just destroyed
# after the last event, so a run whose pings all came exits non-zero with
# "rdma_get_cm_event: Bad file descriptor" (fixed in rdma-core by pull
# request 1622, July 2025; the releases these VMs run predate it). Only a
# run that printed nothing else counts so, and says so on a line of its own;
# every other failure stays one.
rping_verdict() {
  pings=$(grep -c 'ping data: rdma-ping-' "$2")
  if [ "$st" -eq 0 ] && [ "$pings" -ne 10 ]; then
    st=1
  elif [ "$st" -ne 0 ] && [ "$pings" -eq 10 ] &&
    grep -qx 'rdma_get_cm_event: Bad file descriptor' "$2" &&
    ! grep -vxE '(client |server )?(ping data: rdma-ping-.*|DISCONNECT EVENT\.\.\.)|rdma_get_cm_event: Bad file descriptor' "$2" | grep -q .; then
    echo "cluster-tests: $1: rping's teardown race after its 10 verified pings (rdma-core pull request 1622): counted as a pass"
    st=0
  fi
}

echo "cluster-tests: node $me ($RDMADL_SUITE, $myip) of: $RDMADL_CLUSTER"
while read -r id kind srv cli port arg <&3; do
  case $id in '' | \#*) continue ;; esac
  if [ "$kind" = mc ] || [ "$kind" = mca ] || [ "$kind" = mcm ]; then
    rank=0 role=""
    for r in $(echo "$srv" | tr , ' '); do
      [ "$r" != "$me" ] || role=rank$rank
      rank=$((rank + 1))
    done
    [ -n "$role" ] || continue
    peer_ip=$(for r in $(echo "$srv" | tr , ' '); do ip_of "$r"; done | paste -sd, -)
  elif [ "$srv" = "$me" ]; then
    role=server peer=$cli
  elif [ "$cli" = "$me" ]; then
    role=client peer=$srv
  else
    continue
  fi
  [ "$kind" = mc ] || [ "$kind" = mca ] || [ "$kind" = mcm ] || peer_ip=$(ip_of "$peer")
  echo "RDMADL-STEP $id $kind $role peer=$peer_ip up=$(up)s"
  if [ "$kind" != mc ] && [ "$kind" != mca ] && [ "$kind" != mcm ] &&
    ! meet "$role" "$peer_ip" $((port + 9)); then
    echo "cluster-tests: $id: node $peer never came to the rendezvous (400 s)"
    check "$id:meet.$role" 1
    continue
  fi
  case $kind.$role in
    # Debian's own tools: a failure here is the VMs or rxe, not rdmadl.
    # ibv_rc_pingpong sleeps on completion events (-e): busy polling on one
    # vCPU competes with rxe's own kernel work (a server once never finished
    # after its client had done the 100 iterations).
    # Two programs in one test: the pair meets again between them, so a
    # failure of the first (one end hung until its timeout, the other gave up
    # earlier) cannot leave the second's server waiting for a gone client.
    tools.server)
      timeout 60 ibv_rc_pingpong -e -d rxe0 -g "$RDMADL_TEST_GID_INDEX" -p "$port" -n 100 \
        </dev/null >"/tmp/$id.pp" 2>&1
      st=$?
      check "$id:ibv_rc_pingpong.server" $st
      [ $st -eq 0 ] || show "/tmp/$id.pp"
      meet server "$peer_ip" $((port + 8)) || echo "cluster-tests: $id: node $peer did not come to rping"
      timeout 60 rping -s -a "$myip" -p $((port + 1)) -C 10 -v </dev/null >"/tmp/$id.rp" 2>&1
      st=$?
      rping_verdict "$id" "/tmp/$id.rp"
      check "$id:rping.server" $st
      [ $st -eq 0 ] || show "/tmp/$id.rp"
      ;;
    tools.client)
      retry "$id" 90 'remote address' ibv_rc_pingpong -e -d rxe0 -g "$RDMADL_TEST_GID_INDEX" -p "$port" -n 100 "$peer_ip"
      st=$?
      grep -h 'iters in' "/tmp/$id.out"
      check "$id:ibv_rc_pingpong.client" $st
      [ $st -eq 0 ] || show "/tmp/$id.out"
      meet client "$peer_ip" $((port + 8)) || echo "cluster-tests: $id: node $peer did not come to rping"
      retry "$id" 90 'ping data' rping -c -a "$peer_ip" -p $((port + 1)) -C 10 -v
      st=$?
      rping_verdict "$id" "/tmp/$id.out"
      check "$id:rping.client" $st
      [ $st -eq 0 ] || show "/tmp/$id.out"
      ;;
    # rdmadl's drop-in programs, built once on the host.
    rc.server) prog "$id" rc_ops rc_ops --listen --port "$port" ;;
    rc.client) prog "$id" rc_ops rc_ops --connect "$peer_ip" --port "$port" ;;
    cm.server) prog "$id" cm_pingpong cm_pingpong --listen --port "$port" ;;
    cm.client) prog "$id" cm_pingpong cm_pingpong --connect "$peer_ip" --port "$port" ;;
    # The C++ examples.
    pingpong.server) prog "$id" pingpong rdmadl-example-pingpong --listen "$myip" "$port" 200 ;;
    pingpong.client) prog "$id" pingpong rdmadl-example-pingpong --connect "$peer_ip" "$port" 200 ;;
    write_read.server) prog "$id" write_read rdmadl-example-write-read --listen "$port" ;;
    write_read.client) prog "$id" write_read rdmadl-example-write-read --connect "$peer_ip" "$port" ;;
    # Optional RDMA: the same binary on both ends; RDMA when both can.
    # KIND optional_rdma / optional_tcp: the transport both ends must choose;
    # optional_disabled: the client runs with RDMADL_DISABLE=1 (so: tcp).
    optional_*)
      want=tcp
      [ "$kind" != optional_rdma ] || want=rdma
      set -- rdmadl-example-optional-rdma --listen "$port"
      [ "$role" = server ] || set -- rdmadl-example-optional-rdma --connect "$peer_ip" "$port" --size 3000017
      [ "$kind.$role" != optional_disabled.client ] || set -- env RDMADL_DISABLE=1 "$@"
      prog "$id" optional_rdma "$@"
      grep -q "^transport: $want " "/tmp/$id.out"
      check "$id:transport.$want" $?
      grep -q '^moved .*: ok$' "/tmp/$id.out"
      check "$id:checksum" $?
      ;;
    # A bulk transfer for the impaired cluster: 4 MiB over RDMA, its
    # checksum compared end to end (kind bulk, cluster-plan.sh): this end's
    # FNV-1a of every byte must equal the peer's. RDMADL_VM_BREAK=checksum
    # flips the last hex digit of this end's before comparing.
    bulk.*)
      set -- rdmadl-example-optional-rdma --listen "$port"
      [ "$role" = server ] || set -- rdmadl-example-optional-rdma --connect "$peer_ip" "$port" --size 4194304
      prog "$id" optional_rdma "$@"
      grep -q "^transport: rdma " "/tmp/$id.out"
      check "$id:transport.rdma" $?
      sums=$(sed -n 's/^moved 4194304 bytes .* checksum \([0-9a-f]*\) (peer \([0-9a-f]*\)): ok$/\1 \2/p' "/tmp/$id.out")
      [ "${RDMADL_VM_BREAK:-}" != checksum ] ||
        sums=$(echo "$sums" | awk '{ c = substr($1, 16); print substr($1, 1, 15) (c == "0" ? "1" : "0"), $2 }')
      echo "$sums" | awk 'NF == 2 && $1 == $2 { ok = 1 } END { exit !ok }'
      check "$id:checksum" $?
      ;;
    # A peer that dies mid-transfer, seen from the sender (peer_death: the
    # receiver is killed) and from the receiver (peer_death_rx).
    peer_death.server) victim "$id" rdmadl-example-optional-rdma --listen "$port" ;;
    peer_death.client)
      survive "$id" "$peer" rdmadl-example-optional-rdma --connect "$peer_ip" "$port" --size 1073741824
      ;;
    peer_death_rx.server) survive "$id" "$peer" rdmadl-example-optional-rdma --listen "$port" ;;
    peer_death_rx.client)
      victim "$id" rdmadl-example-optional-rdma --connect "$peer_ip" "$port" --size 1073741824
      ;;
    # Impairment profile ARG of the hub for the tests that follow: a TCP SYN
    # to port 47900+ARG, refused by the peer, selects it as it passes the hub.
    impair.server)
      nc -w 5 "$peer_ip" $((47900 + arg)) </dev/null >"/tmp/$id.nc" 2>&1
      grep -q 'refused' "/tmp/$id.nc"
      check "$id:impair.select" $?
      ;;
    impair.client) ;;
    # A multi_channel of three ranks on two nodes (the impaired cluster):
    # ranks 0 and 2 on the server's node, rank 1 on the client's; no kill.
    # mcfb: the same with create_cm and transport automatic under profile
    # noroce (cluster-plan.sh): --caps says which pairs must end on RDMA (0
    # and 2, one node) and which on TCP (rank 1's, fallen back), and
    # rdma_cm's attempt across the hub gets half of a 20 s step_timeout.
    # mcrtu: the same under profile nortu, every pair over RDMA.
    mc2.* | mcfb.* | mcrtu.*)
      lim=240
      case $id in impair.*) lim=120 ;; esac
      nodes=$myip,$peer_ip,$myip r=0
      [ "$role" = server ] || nodes=$peer_ip,$myip,$peer_ip r=1
      set --
      [ "$kind" != mcfb ] || set -- --step-timeout 20 --caps rdma,none,rdma --cm
      [ "$kind" != mcrtu ] || set -- --step-timeout 20 --caps rdma,rdma,rdma --cm
      t0=$(up)
      if [ "$role" = server ]; then
        timeout $lim cxx_mc_cluster --rank 2 --nodes "$nodes" --port "$port" --kill -1 --id "$id" \
          "$@" </dev/null >"/tmp/$id.r2" 2>&1 &
        pid=$!
      fi
      timeout $lim cxx_mc_cluster --rank $r --nodes "$nodes" --port "$port" --kill -1 --id "$id" \
        "$@" </dev/null 2>&1
      st=$?
      if [ "$role" = server ]; then
        wait "$pid"
        st2=$?
        cat "/tmp/$id.r2"
        check "$id:mc_rank2.exit" $st2
      fi
      echo "RDMADL-TIME $id $(echo "$(up) $t0" | awk '{print $1 - $2}') $lim"
      check "$id:mc_cluster.exit" $st
      ;;
    # A multi_channel over three nodes; it prints its own checks at once,
    # and rank 0 asks the host to kill rank 2's node mid-scope.
    mc.rank*)
      timeout 240 cxx_mc_cluster --rank "${role#rank}" --nodes "$peer_ip" --port "$port" \
        --kill "${srv##*,}" --id "$id" </dev/null 2>&1
      st=$?
      [ "$role" != rank2 ] || echo "cluster-tests: rank 2 still alive after its test"
      check "$id:mc_cluster.exit" $st
      ;;
    # The same with channel_transport::automatic: each rank's capability is
    # its node's suite (none: no rdma-core), RDMA where both have it; mcm
    # builds it with create_cm (--cm) instead of trading blobs, and kills
    # nobody (mca, after it, kills rank 2's node).
    mca.rank* | mcm.rank*)
      caps=$(for r in $(echo "$srv" | tr , ' '); do
        echo "$RDMADL_CLUSTER" | awk -v i=$((r + 1)) '{print $i == "none" ? "none" : "rdma"}'
      done | paste -sd, -)
      kill=${srv##*,} cm=""
      [ "$kind" != mcm ] || kill=-1 cm=--cm
      timeout 240 cxx_mc_cluster --rank "${role#rank}" --nodes "$peer_ip" --port "$port" \
        --kill "$kill" --id "$id" --caps "$caps" $cm </dev/null 2>&1
      st=$?
      [ "$role" != rank2 ] || [ "$kind" = mcm ] ||
        echo "cluster-tests: rank 2 still alive after its test"
      check "$id:mc_cluster.exit" $st
      ;;
    *)
      echo "cluster-tests: unknown test kind $kind"
      check "$id:known-kind" 1
      ;;
  esac
done 3</payload/cluster-plan
echo "RDMADL-CLUSTER-NODE-DONE node=$me status=$status up=$(up)s"
exit $status
