#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/install/defaults.sh SOURCE_DIR CC CXX: configures SOURCE_DIR as a
# plain top-level build (no RDMADL_* option given) in a temporary directory
# and checks what it would build (README, "Build options"): the libraries,
# librdmadl-ffi and rdmadl-info, with install rules; no test, example or
# benchmark.
set -euo pipefail
src=${1:?usage: defaults.sh SOURCE_DIR CC CXX}
cc=$2 cxx=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "defaults test: $*" >&2; exit 1; }

CC=$cc CXX=$cxx cmake -S "$src" -B "$tmp/b" -G Ninja >"$tmp/configure.log" 2>&1 ||
  fail "configure failed: $(cat "$tmp/configure.log")"
targets=$(ninja -C "$tmp/b" -t targets all | cut -d: -f1)
for t in rdmadl rdmadl_loader rdmadl_verbs rdmadl_verbs_static rdmadl_ffi rdmadl_ffi_static \
  rdmadl-info install; do
  grep -qx "$t" <<<"$targets" || fail "a top-level build lacks $t"
done
for t in loader_absent_test_static cxx_provider_test rdmadl-example-pingpong rdmadl-bench-cxx; do
  if grep -qx "$t" <<<"$targets"; then fail "a top-level build defines $t by default"; fi
done
[ ! -f "$tmp/b/CTestTestfile.cmake" ] || fail "a top-level build registers tests by default"
echo "defaults test: ok"
