#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/install/run.sh BUILD_DIR CC CXX FLAGS: installs BUILD_DIR into a
# temporary prefix and builds, against that prefix only, (1) a CMake project
# using find_package(rdmadl) with the C++ API and the drop-in target, and
# (2) an ordinary C verbs program compiled with pkg-config's rdmadl-verbs
# flags, and (3) a C program of rdma-core's libraries built against the
# installed link aliases (tests/dropin/check-link-aliases.sh). Runs each with
# RDMADL_DISABLE=1 (the answers must be consistent) and checks that nothing
# needs libibverbs or librdmacm at link or load time.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR CC CXX FLAGS}
cc=$2 cxx=$3 flags=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
demo=$here/../dropin/dropin_demo.c
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || fail "install failed: $(cat "$tmp/install.log")"
[ -e "$tmp/prefix/lib/librdmadl.a" ] || [ -e "$tmp/prefix/lib/librdmadl.so.0" ] ||
  fail "not installed: lib/librdmadl.a or lib/librdmadl.so.0"
for f in include/rdmadl/rdmadl.hpp include/rdmadl/loader.h include/rdmadl/rdma/infiniband/verbs.h \
  lib/librdmadl-verbs.so.0 lib/cmake/rdmadl/rdmadlConfig.cmake \
  lib/pkgconfig/rdmadl-verbs.pc; do
  [ -e "$tmp/prefix/$f" ] || fail "not installed: $f"
done
[ -e "$tmp/prefix/share/man/man1/rdmadl-info.1" ] || fail "not installed: rdmadl-info(1)"

# (1) find_package. No path to the source or build tree is given.
CC=$cc CXX=$cxx cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DDROPIN_SOURCE="$demo" >"$tmp/configure.log" 2>&1 || fail "configure failed: $(cat "$tmp/configure.log")"
cmake --build "$tmp/consumer" >"$tmp/build.log" 2>&1 || fail "build failed: $(cat "$tmp/build.log")"
RDMADL_DISABLE=1 "$tmp/consumer/consumer_cxx" | tee "$tmp/cxx.out"
grep -q 'consumer: no stack.*: consistent' "$tmp/cxx.out" || fail "C++ consumer inconsistent"
RDMADL_DISABLE=1 LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/consumer_c" | tee "$tmp/c.out"
grep -q 'dropin-demo: consistent' "$tmp/c.out" || fail "drop-in consumer (find_package) inconsistent"

# (2) pkg-config, as a Makefile would use it.
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
pc=$(pkg-config --cflags --libs rdmadl-verbs) || fail "pkg-config rdmadl-verbs failed"
echo "pkg-config: $pc"
# shellcheck disable=SC2086 # word splitting of the flags is intended
"$cc" $flags -o "$tmp/demo_pc" "$demo" $pc || fail "pkg-config build failed"
RDMADL_DISABLE=1 LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/demo_pc" | tee "$tmp/pc.out"
grep -q 'dropin-demo: consistent' "$tmp/pc.out" || fail "drop-in consumer (pkg-config) inconsistent"

# (3) rdma-core's link names and .pc files, installed beside the drop-in.
"$here/../dropin/check-link-aliases.sh" "$tmp/prefix/lib/rdmadl/rdma-core" \
  "$tmp/prefix/include/rdmadl/rdma" "$cc" "$flags" || fail "installed link aliases"

for exe in consumer/consumer_cxx consumer/consumer_c demo_pc; do
  needed=$(readelf -d "$tmp/$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "$exe NEEDED: $needed"
  case " $needed " in *libibverbs* | *librdmacm*) fail "$exe needs rdma-core: $needed" ;; esac
done
case " $(readelf -d "$tmp/demo_pc" | tr -d '[]') " in *librdmadl-verbs.so.0*) ;; *) fail "demo_pc does not need librdmadl-verbs.so.0" ;; esac
# A shared build (BUILD_SHARED_LIBS=ON) installs librdmadl.so.0: the C++
# consumer must then load it, not a copy of the archive.
if [ -e "$tmp/prefix/lib/librdmadl.so.0" ]; then
  case " $(readelf -d "$tmp/consumer/consumer_cxx" | tr -d '[]') " in
    *librdmadl.so.0*) echo "consumer_cxx uses the shared librdmadl.so.0" ;;
    *) fail "consumer_cxx does not need librdmadl.so.0 in a shared build" ;;
  esac
fi
echo "install test: ok"
