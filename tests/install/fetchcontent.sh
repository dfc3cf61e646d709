#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/install/fetchcontent.sh SOURCE_DIR CC CXX FLAGS: builds the README's
# FetchContent consumer (tests/install/fetchcontent/) from SOURCE_DIR in a
# temporary directory, runs it with RDMADL_DISABLE=1 (the answers must be
# consistent) and checks that rdmadl as a subproject defines its library
# targets but none of its tests, tools, examples or benchmarks.
set -euo pipefail
src=${1:?usage: fetchcontent.sh SOURCE_DIR CC CXX FLAGS}
cc=$2 cxx=$3 flags=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "fetchcontent test: $*" >&2; exit 1; }

CC=$cc CXX=$cxx cmake -S "$here/fetchcontent" -B "$tmp/b" -G Ninja -DRDMADL_SOURCE="$src" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  >"$tmp/configure.log" 2>&1 || fail "configure failed: $(cat "$tmp/configure.log")"
targets=$(ninja -C "$tmp/b" -t targets all | cut -d: -f1)
for t in rdmadl rdmadl_loader rdmadl_verbs consumer_cxx; do
  grep -qx "$t" <<<"$targets" || fail "target $t missing"
done
for t in rdmadl-info loader_absent_test_static rdmadl_ffi cxx_provider_test; do
  if grep -qx "$t" <<<"$targets"; then fail "a subproject build defines $t"; fi
done
cmake --build "$tmp/b" --target consumer_cxx >"$tmp/build.log" 2>&1 ||
  fail "build failed: $(cat "$tmp/build.log")"
RDMADL_DISABLE=1 "$tmp/b/consumer_cxx" | tee "$tmp/out"
grep -q 'consumer: no stack.*: consistent' "$tmp/out" || fail "consumer inconsistent"
echo "fetchcontent test: ok"
