#!/bin/sh
# SPDX-License-Identifier: MIT
# Usage: man-test.sh MAN_PAGE RDMADL_INFO
# The man page renders with groff without a single warning (-ww), and it
# documents every option and exit status that rdmadl-info --help lists and
# every RDMADL_* variable the loader reads. Skips (77) without groff
# (ci/install-deps.sh installs groff-base).
set -u
page=$1 info=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v groff >/dev/null 2>&1 || { echo "SKIP: no groff (package groff-base)"; exit 77; }
warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1) || fail "groff failed: $warn"
[ -z "$warn" ] || fail "groff warns: $warn"
text=$(groff -man -Tutf8 -P-cbou "$page" 2>/dev/null | tr -s ' ') || fail "cannot render"
for s in NAME SYNOPSIS DESCRIPTION OPTIONS VERDICT "LIBRARY SUMMARY" "EXIT STATUS" ENVIRONMENT FILES EXAMPLES \
         "SEE ALSO" "ibv_devinfo(1)" "show_gids(8)"; do
  echo "$text" | grep -q "$s" || fail "no '$s' in the page"
done
# Every option of --help ("-d, --ib-dev", "--json", ...) and every exit status.
opts=$("$info" --help | grep -oE '(^| )--?[a-z][a-z-]*' | sort -u)
[ -n "$opts" ] || fail "no options in --help"
for o in $opts; do
  echo "$text" | grep -q -- "$o" || fail "option $o of --help is not in the page"
done
codes=$("$info" --help | sed -n '/^Exit status/,/^$/p' | grep -oE '^ *[0-9]+  ' | tr -d ' ')
[ -n "$codes" ] || fail "no exit statuses in --help"
for c in $codes; do
  echo "$text" | grep -qE "^ *$c\$|^ *$c " || fail "exit status $c is not in the page"
done
# Every variable the loader reads.
for v in DEBUG DISABLE IBVERBS_PATH RDMACM_PATH MLX5_PATH EFA_PATH MLX4_PATH HNS_PATH MANA_PATH \
         IONIC_PATH IBUMAD_PATH; do
  echo "$text" | grep -q "RDMADL_$v" || fail "RDMADL_$v is not in the page"
done
echo ok
