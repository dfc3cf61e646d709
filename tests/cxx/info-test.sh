#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: info-test.sh RDMADL_INFO EXPECTED_STATUS SYMBOLS_DEF [MODE [ARG]]
# Runs rdmadl-info in the current environment: the exit status of plain,
# --check and --json runs equals EXPECTED_STATUS, --json is valid UTF-8 JSON
# that agrees with the text field by field (info-check.py), and the text says
# why RDMA is not usable. MODE adds checks:
#   absent           no library loaded (empty fields print -), ARG: the
#                    expected libibverbs summary (a regex)
#   release VERSION  a real rdma-core release: libibverbs and librdmacm are
#                    "complete for rdma-core VERSION", none is PARTIAL
#   summary REGEX    libibverbs' summary matches REGEX
#   fake             the fake provider's device: the GID table, the GID a QP
#                    would use, unsigned limits, and -d/-i/-g filters
#   fake-ib          the same device with an InfiniBand port (FAKEPROV_KNOBS)
set -u
info=$1 want=$2 mode=${4:-} arg=${5:-}
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || fail "python3 is needed"
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
# libibverbs' symbol count, from the one table.
ibv_symbols=$(grep -c '^RDMADL_SYM(IBV,' "$3") || fail "cannot read $3"
"$info" >"$tmp/out"; st=$?
[ "$st" -eq "$want" ] || fail "plain run exited $st, expected $want"
"$info" --check >/dev/null; st=$?
[ "$st" -eq "$want" ] || fail "--check exited $st, expected $want"
[ -z "$("$info" --check)" ] || fail "--check printed something"
"$info" --json >"$tmp/json"; st=$?
[ "$st" -eq "$want" ] || fail "--json exited $st, expected $want"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert d["exit_status"] == want, d["exit_status"]
assert d["usable"] == (want == 0)
assert d["libraries"]["libibverbs"]["symbols"] == int(sys.argv[3])
assert d["reason"]
' "$tmp/json" "$want" "$ibv_symbols" || fail "--json output is not valid or disagrees"
# Text and JSON: the same summarys, counts, limits and GIDs.
checks=
case $mode in
  release) checks="summary=libibverbs=complete for rdma-core $arg \\(IBVERBS_1\\.[0-9]+\\): [0-9]+ newer symbols? absent(, [0-9]+ emulated)?
summary=librdmacm=complete for rdma-core $arg \\(RDMACM_1\\.[0-9]+\\)(: [0-9]+ newer symbols? absent(, [0-9]+ emulated)?)?" ;;
  summary|absent) [ -z "$arg" ] || checks="summary=libibverbs=$arg" ;;
  fake) checks=fake ;;
  fake-ib) checks=fake-ib ;;
esac
(IFS='
'; set -f; python3 "$here/info-check.py" "$tmp/out" "$tmp/json" $checks) ||
  fail "text and JSON disagree, or an expectation failed"
out=$(cat "$tmp/out")
echo "$out" | grep -q '^usable: ' || fail "no 'usable:' line"
if [ "$want" -ne 0 ]; then
  echo "$out" | grep -q '^usable: no: .' || fail "does not say why RDMA is not usable"
fi
"$info" --help | grep -q -- '--check' || fail "--help does not document --check"
"$info" --help | grep -q -- '--ib-dev' || fail "--help does not document --ib-dev"
"$info" --help | grep -q '^  3  ' || fail "--help does not document exit status 3"
for bad in --bogus "-i 0" "-i 256" "-i x" "-g -1" "-d" "--ib-port=" "-g 1x"; do
  # shellcheck disable=SC2086
  "$info" $bad >/dev/null 2>&1; st=$?
  [ $st -eq 64 ] || fail "'$bad' exited $st, not a usage error (64)"
done
# Write errors: a full device, a closed stdout.
err=$("$info" 2>&1 >/dev/full); st=$?
[ "$st" -eq 74 ] || fail "writing to /dev/full exited $st, expected 74"
echo "$err" | grep -q 'cannot write the output' || fail "no message for a failed write: $err"
"$info" --json >/dev/full 2>/dev/null; st=$?
[ "$st" -eq 74 ] || fail "--json to /dev/full exited $st, expected 74"
"$info" --help >/dev/full 2>/dev/null; st=$?
[ "$st" -eq 74 ] || fail "--help to /dev/full exited $st, expected 74"
"$info" >&- 2>/dev/null; st=$?
[ "$st" -eq 74 ] || fail "a closed stdout exited $st, expected 74"
if [ "$mode" = absent ]; then
  # Empty fields print "-".
  echo "$out" | grep -q '^  path:         -$' || fail "an empty path does not print -"
  echo "$out" | grep -q '^  version node: -$' || fail "an empty version node does not print -"
fi
# A path with a newline and a tab cannot start a line of its own.
forged=$(RDMADL_DISABLE=0 RDMADL_IBVERBS_PATH="$(printf '/nonexistent/a\nusable: yes: forged\tx')" "$info")
printf "%s\n" "$forged" | grep -q '^usable: yes' && fail "a path with a newline forged a line"
printf "%s\n" "$forged" | grep -q 'requested:    /nonexistent/a\\nusable: yes: forged\\tx$' ||
  fail "the newline in the path is not shown escaped"
# A path that is not UTF-8 (Latin-1 bytes, a truncated sequence) keeps the JSON
# valid UTF-8 (each bad byte U+FFFD); well-formed UTF-8 passes through.
badpath=$(printf '/nonexistent/caf\351-\342\202-\303\251')
RDMADL_DISABLE=0 RDMADL_IBVERBS_PATH="$badpath" "$info" --json >"$tmp/bad.json"
RDMADL_DISABLE=0 RDMADL_IBVERBS_PATH="$badpath" "$info" >"$tmp/bad.out"
python3 -c '
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
got = d["libraries"]["libibverbs"]["requested"]
assert got == "/nonexistent/caf\ufffd-\ufffd\ufffd-\u00e9", repr(got)
' "$tmp/bad.json" || fail "a non-UTF-8 path made the JSON invalid or was not replaced"
grep -q 'requested:    /nonexistent/caf\\xe9-\\xe2\\x82-é$' "$tmp/bad.out" ||
  fail "the text does not escape the bytes that are not UTF-8: $(grep requested: "$tmp/bad.out" | head -1)"
if [ "$mode" = fake ]; then
  # -d / -i / -g, as ibv_devinfo's: a match keeps the status, none is 3
  # with a message naming what exists; --check stays silent.
  for ok in "-d fake0" "--ib-dev=fake0" "-i 1" "-d fake0 -i 1 -g 2" "--ib-port 1 --gid-index=1"; do
    # shellcheck disable=SC2086
    "$info" $ok >/dev/null; st=$?
    [ $st -eq 0 ] || fail "'$ok' exited $st, expected 0"
  done
  # shellcheck disable=SC2086
  "$info" --json -g 1 >"$tmp/g1.json" && "$info" -g 1 >"$tmp/g1.out" &&
    python3 "$here/info-check.py" "$tmp/g1.out" "$tmp/g1.json" fake gids=1 ||
    fail "-g 1 does not show exactly GID 1"
  "$info" --json -d fake0 -i 1 >"$tmp/d.json" && "$info" -d fake0 -i 1 >"$tmp/d.out" &&
    python3 "$here/info-check.py" "$tmp/d.out" "$tmp/d.json" fake gids=0,1,2 ||
    fail "-d fake0 -i 1 does not show the whole port"
  for miss in "-d nope:no RDMA device 'nope' (present: fake0)" "-i 2:no port 2 on any device" \
              "-d fake0 -i 2:no port 2 on fake0" "-g 3:no GID index 3"; do
    args=${miss%%:*} msg=${miss#*:}
    # shellcheck disable=SC2086
    err=$("$info" $args 2>&1 >"$tmp/miss.out"); st=$?
    [ $st -eq 3 ] || fail "'$args' exited $st, expected 3"
    echo "$err" | grep -qF "$msg" || fail "'$args' says '$err', not '$msg'"
    [ -s "$tmp/miss.out" ] && fail "'$args' printed a report"
    # shellcheck disable=SC2086
    [ -z "$("$info" --check $args 2>&1)" ] || fail "--check '$args' printed something"
  done
  # A device that cannot be opened, or a GID table that cannot be read, is
  # shown with its error: -i/-g cannot tell whether the port or GID exists.
  FAKEPROV_FAIL=OPEN_DEVICE=13 "$info" -i 1 >"$tmp/open.out"; st=$?
  [ $st -eq 2 ] || fail "-i 1 on a device that cannot be opened exited $st, expected 2"
  grep -q '^  error:     cannot open: Permission denied$' "$tmp/open.out" ||
    fail "no 'cannot open' error: $(cat "$tmp/open.out")"
  FAKEPROV_FAIL=QUERY_GID=5 "$info" -g 1 >"$tmp/gid.out"; st=$?
  [ $st -eq 0 ] || fail "-g 1 with an unreadable GID table exited $st, expected 0"
  FAKEPROV_FAIL=QUERY_GID=5 "$info" -g 1 --json >"$tmp/gid.json"
  python3 "$here/info-check.py" "$tmp/gid.out" "$tmp/gid.json" || fail "text and JSON disagree"
  grep -q '^    gid table: Input/output error$' "$tmp/gid.out" || fail "no GID table error"
  python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["devices"][0]["ports"][0]
assert p["gids"] == [] and p["gids_error"] == "Input/output error", p
assert p["would_use_gid"] is None and p["would_use_gid_error"], p
' "$tmp/gid.json" || fail "the JSON does not carry the GID table's error"
fi
echo ok
