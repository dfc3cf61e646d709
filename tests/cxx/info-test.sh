#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: info-test.sh RDMADL_INFO EXPECTED_STATUS SYMBOLS_DEF
# Runs rdmadl-info in the current environment: the exit status of plain,
# --check and --json runs equals EXPECTED_STATUS, --json is valid JSON that
# agrees with it, and the text says why RDMA is not usable.
set -u
info=$1 want=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
# libibverbs' symbol count, from the one table.
ibv_symbols=$(grep -c '^RDMADL_SYM(IBV,' "$3") || fail "cannot read $3"
out=$("$info"); st=$?
[ "$st" -eq "$want" ] || fail "plain run exited $st, expected $want"
"$info" --check >/dev/null; st=$?
[ "$st" -eq "$want" ] || fail "--check exited $st, expected $want"
[ -z "$("$info" --check)" ] || fail "--check printed something"
json=$("$info" --json); st=$?
[ "$st" -eq "$want" ] || fail "--json exited $st, expected $want"
if command -v python3 >/dev/null 2>&1; then
  echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = int(sys.argv[1])
assert d["exit_status"] == want, d["exit_status"]
assert d["usable"] == (want == 0)
assert d["libraries"]["libibverbs"]["symbols"] == int(sys.argv[2])
assert d["reason"]
' "$want" "$ibv_symbols" || fail "--json output is not valid or disagrees"
fi
echo "$out" | grep -q '^usable: ' || fail "no 'usable:' line"
if [ "$want" -ne 0 ]; then
  echo "$out" | grep -q '^usable: no: .' || fail "does not say why RDMA is not usable"
fi
"$info" --help | grep -q -- '--check' || fail "--help does not document --check"
"$info" --bogus >/dev/null 2>&1; [ $? -eq 64 ] || fail "an unknown option is not a usage error"
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
# Empty fields print "-" (no library loaded in the environments this runs in).
echo "$out" | grep -q '^  path:         -$' || fail "an empty path does not print -"
echo "$out" | grep -q '^  version node: -$' || fail "an empty version node does not print -"
# A path with a newline and a tab cannot start a line of its own.
forged=$(RDMADL_DISABLE=0 RDMADL_IBVERBS_PATH="$(printf '/nonexistent/a\nusable: yes: forged\tx')" "$info")
printf "%s\n" "$forged" | grep -q '^usable: yes' && fail "a path with a newline forged a line"
printf "%s\n" "$forged" | grep -q 'requested:    /nonexistent/a\\nusable: yes: forged\\tx$' ||
  fail "the newline in the path is not shown escaped"
echo ok
