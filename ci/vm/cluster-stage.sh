# SPDX-License-Identifier: MIT
# The cluster stage of the Soft-RoCE tier (sourced by ci/test-vm.sh): one
# cluster of 2 to 4 nodes booted from the same build (ci/vm/cluster.sh),
# running the plan of cluster-plan.sh with the guest side cluster-tests.sh,
# and its tally: each node's exit, and every check each side of each test owes.
# Uses test-vm.sh's build, logs, imgdir, version, cluster_timeout,
# program_file and programs; adds to cluster_summary, cluster_failed,
# cl_pass and cl_fail. With cl_impair set ("NAME:SPEC ...", hub profiles),
# the cluster runs impair_plan under those profiles instead, and
# impair_tally checks the hub's counts and prints the slowdown.
# shellcheck shell=bash disable=SC2154,SC2004 # test-vm.sh's variables and arrays

# shellcheck source-path=SCRIPTDIR source=cluster-plan.sh
. "$here/vm/cluster-plan.sh"

# cluster_stage K SUITE...: cluster number K, node i running SUITE i.
cluster_stage() {
  local ck=$1 s img cpay clog b0 st secs i what want kind srv cli id n p owed_all nodes_in
  local node side chk got extra e who name
  shift
  local -a cn=("$@") lines=()
  for s in "${cn[@]}"; do
    [ -z "${imgdir[$s]:-}" ] || continue
    if img=$("$here/vm/build-image.sh" "$s" 2>"$logs/$s.image.log" | tail -n 1) && [ -f "$img/done" ]; then
      imgdir[$s]=$img
      version[$s]=$(sed -n 's/^RDMA_CORE=//p' "$img/info")
    fi
  done
  cpay=$build/vm-cluster-$ck
  rm -rf "$cpay"; mkdir -p "$cpay/bin"
  while read -r name kind; do cp "$(program_file "$name" "$kind")" "$cpay/bin/"; done < <(programs cluster)
  guest_script "$here/vm/cluster-tests.sh" "${RDMADL_VM_CLUSTER_BREAK:-}" >"$cpay/guest-tests.sh"
  strip_debug "$cpay"
  local -a hub_args=()
  if [ -n "${cl_impair:-}" ]; then
    for p in $cl_impair; do hub_args+=(--impair "$p"); done
    hub_args+=(--seed "${RDMADL_VM_IMPAIR_SEED:-1}")
    local -a pn=()
    for p in $cl_impair; do pn+=("${p%%:*}"); done
    impair_plan "${pn[@]}" >"$cpay/cluster-plan"
  else
    cluster_plan "${cn[@]}" >"$cpay/cluster-plan"
  fi
  clog=$logs/cluster-$ck
  say "cluster $ck: ${cn[*]} ($(wc -l <"$cpay/cluster-plan") cross-node tests)"
  b0=$(date +%s)
  set +e
  "$here/vm/cluster.sh" --nodes "${cn[*]}" --payload "$cpay" --timeout "$cluster_timeout" \
    --log-dir "$clog" "${hub_args[@]}" >"$clog.log" 2>&1
  st=$?
  set -e
  secs=$(($(date +%s) - b0))
  label() { # NODE: "nI SUITE (rdma-core V)"
    local s=${cn[$1]}
    if [ "$s" = none ]; then echo "n$1 none (no rdma-core)"; else echo "n$1 $s (${version[$s]:-?})"; fi
  }
  # Each node: a clean exit, or killed because a test asked for it.
  touch "$clog/nodes" "$clog/checks"
  for ((i = 0; i < ${#cn[@]}; i++)); do
    what=$(awk -v i="$i" '$1 == i {$1 = $2 = $3 = ""; sub(/^ +/, ""); print}' "$clog/nodes")
    want="exit 0"
    while read -r _ kind srv cli _; do
      [ "$(cluster_killed "$kind" "$srv" "$cli")" != "$i" ] || want="killed on request"
    done <"$cpay/cluster-plan"
    if [ "$what" = "$want" ]; then
      cl_pass=$((cl_pass + 1))
    else
      cl_fail=$((cl_fail + 1))
      cluster_failed+=("cluster $ck: node $i (${cn[$i]}): ${what:-no status}, want $want")
    fi
    lines+=("  $(label "$i"), 192.0.2.$((10 + i)): ${what:-no status}")
  done
  # Each plan line: every check each side owes, reported and PASS; any other
  # check a side printed for it must pass too.
  while read -r id kind srv cli _; do
    n=0 p=0 owed_all="" nodes_in=""
    while read -r node side; do
      owed_all+=" $(cluster_owed "$kind" "$side")"
      nodes_in+=" node$node"
      for chk in $(cluster_owed "$kind" "$side"); do
        got=$(awk -v k="node$node" -v c="$id:$chk" '$1 == k && $2 == c {print $3; exit}' "$clog/checks")
        n=$((n + 1))
        if [ "$got" = PASS ]; then
          p=$((p + 1))
        else
          cluster_failed+=("cluster $ck: $id: node $node: $chk ${got:-never reported}")
        fi
      done
    done < <(cluster_sides "$kind" "$srv" "$cli")
    extra=$(awk -v nodes="$nodes_in " -v id="$id:" \
      'index(nodes, " " $1 " ") && index($2, id) == 1 && $3 != "PASS" {print $1 ":" $2 ":" $3}' "$clog/checks")
    for e in $extra; do
      n=$((n + 1))
      case " $owed_all " in
        *" $(echo "$e" | cut -d: -f3) "*) n=$((n - 1)) ;; # already counted as owed
        *) cluster_failed+=("cluster $ck: $id: $e") ;;
      esac
    done
    cl_pass=$((cl_pass + p))
    cl_fail=$((cl_fail + n - p))
    if [ "$kind" = mc ] || [ "$kind" = mca ] || [ "$kind" = mcm ]; then
      who=$(for r in ${srv//,/ }; do label "$r"; done | paste -sd, - | sed 's/,/, /g')
    else
      who="$(label "$srv") <- $(label "$cli")"
    fi
    lines+=("  $id: $who: $n checks, $p passed")
  done <"$cpay/cluster-plan"
  [ -z "${cl_impair:-}" ] || impair_tally "$ck" "$clog"
  cluster_summary+=("cluster $ck (${cn[*]}): $secs s, cluster.sh exit $st" "${lines[@]}")
  if [ "$st" != 0 ]; then
    # (no line matches when cluster.sh stopped before the boot: not fatal)
    grep -E 'FAILED|RDMADL-CHECK .* FAIL$|hung|died|error:' "$clog.log" | tail -n 40 |
      sed "s/^/  cluster $ck| /" >&2 || true
  fi
}

# impair_tally K CLOG: for cluster K run under cl_impair, a check per hub
# profile "impair.NAME.hub": the guests selected it and the hub impaired
# RoCE frames under it (dropped some when its drop rate is not 0); and per
# test the wall time against the same test unimpaired ("RDMADL-TIME" lines,
# the slower side). Adds to lines, cl_pass, cl_fail, cluster_failed.
impair_tally() {
  local ck=$1 clog=$2 p name spec hubl ok id t0 t1 lim kind
  lines+=("  hub seed ${RDMADL_VM_IMPAIR_SEED:-1}, profiles: $cl_impair (RoCE v2 frames only)")
  for p in $cl_impair; do
    name=${p%%:*} spec=${p#*:}
    hubl=$(grep -h "^hub: impair $name (" "$clog/hub.log" 2>/dev/null || true)
    ok=$(echo "$hubl" | awk -v spec=",$spec," '
      match($0, /selected [0-9]+ times, RoCE frames seen [0-9]+, dropped [0-9]+/) {
        split(substr($0, RSTART, RLENGTH), w, /[ ,]+/)
        drops = (spec !~ /,drop=0?(\.0*)?,/ && spec ~ /,drop=/) || spec ~ /,rtu=1,/
        print (w[2] > 0 && w[7] > 0 && (!drops || w[9] > 0)) ? 1 : 0
      }')
    if [ "$ok" = 1 ]; then
      cl_pass=$((cl_pass + 1))
    else
      cl_fail=$((cl_fail + 1))
      cluster_failed+=("cluster $ck: impair.$name.hub: ${hubl:-no hub count}")
    fi
    lines+=("  impair.$name.hub: ${hubl#hub: impair }")
    for kind in $(impair_kinds_of "$name"); do
      id=impair.$name.$kind.n0-n1
      t0=$(impair_time "$clog" "impair.none.$kind.n0-n1")
      t1="" lim="" # no time when a side never ran the test
      read -r t1 lim < <(impair_time "$clog" "$id" lim) || true
      lines+=("  $id: ${t1:-?} s (deadline ${lim:-?} s) against ${t0:-?} s unimpaired$(
        awk -v a="$t1" -v b="$t0" 'BEGIN { if (a != "" && b > 0) printf ", x%.1f", a / b }')")
    done
  done
}

# impair_time CLOG ID [lim]: the slower side's wall time of test ID (and its
# deadline with "lim").
impair_time() {
  { cat "$1"/node*.log 2>/dev/null || true; } | tr -d '\r' | awk -v id="$2" -v l="${3:-}" '
    $1 == "RDMADL-TIME" && $2 == id { if ($3 > t) t = $3; lim = $4 }
    END { if (t != "") print t (l != "" ? " " lim : "") }'
}
