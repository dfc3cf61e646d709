#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-docs.sh [OUT_DIR]: the reference manual. Runs Doxygen (docs/Doxyfile)
# over the public headers into OUT_DIR (default build/docs) and fails on any
# warning: every public entity must carry its contract comment. Also checks
# that the man page renders without warnings. Prints "N passed, M failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(realpath -m "${1:-build/docs}")
mkdir -p "$out"
passed=0 failed=0
check() { # NAME CMD...: one check, its output kept on failure
  local name=$1; shift
  if "$@" >"$out/$name.log" 2>&1; then
    passed=$((passed + 1)); echo "docs: PASS $name"
  else
    failed=$((failed + 1)); echo "docs: FAIL $name"; sed 's/^/  /' "$out/$name.log"
  fi
}
version=$(sed -n 's/^#define RDMADL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/rdmadl/version.h | paste -sd.)
doxygen_clean() {
  RDMADL_VERSION=$version RDMADL_DOCS_OUT=$out doxygen docs/Doxyfile || return 1
  if [ -s "$out/warnings.log" ]; then cat "$out/warnings.log"; return 1; fi
  [ -e "$out/html/index.html" ] || { echo "no html/index.html"; return 1; }
}
check doxygen doxygen_clean
man_clean() { # groff's warnings (-ww) on stderr are failures
  local err
  err=$(groff -man -Tutf8 -ww tools/rdmadl-info.1 2>&1 >/dev/null) || return 1
  [ -z "$err" ] || { echo "$err"; return 1; }
}
if [ -e tools/rdmadl-info.1 ]; then check man-page man_clean; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
