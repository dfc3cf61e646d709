#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/install/run.sh BUILD_DIR CC CXX FLAGS: installs BUILD_DIR into a
# temporary prefix and builds, against that prefix only, (1) a CMake project
# using find_package(rdmadl) with the C++ API and the drop-in target, and
# (2) an ordinary C verbs program compiled with pkg-config's rdmadl-verbs
# flags, and (3) a C program of rdma-core's libraries built against the
# installed link aliases (tests/dropin/check-link-aliases.sh), (4) the C++
# API compiled with pkg-config's rdmadl flags, plain and --static, (5) the
# README's C++17 recipe (a C++17 target calling rdmadl through a C++20 one),
# and a C++17 target including rdmadl refused with rdmadl's #error, and
# (6) the installed rdmadl-info run from the prefix (and from the prefix
# moved elsewhere) with no LD_LIBRARY_PATH. Runs each with RDMADL_DISABLE=1
# (the answers must be consistent) and checks that nothing needs libibverbs
# or librdmacm at link or load time.
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
  lib/pkgconfig/rdmadl-verbs.pc lib/pkgconfig/rdmadl.pc lib/librdmadl-loader.a; do
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

RDMADL_DISABLE=1 "$tmp/consumer/consumer_cxx17" | tee "$tmp/cxx17.out"
grep -q 'consumer17: no stack.*: consistent' "$tmp/cxx17.out" || fail "C++17 consumer (bridge) inconsistent"
# A C++17 target that includes rdmadl itself: rdmadl's #error, not a silent -std=c++20.
cmake -S "$here/consumer" -B "$tmp/consumer" -DCXX17_DIRECT=ON >>"$tmp/configure.log" 2>&1 ||
  fail "configure (CXX17_DIRECT) failed: $(cat "$tmp/configure.log")"
if cmake --build "$tmp/consumer" --target consumer_cxx17_direct --verbose >"$tmp/build17.log" 2>&1; then
  fail "a CXX_STANDARD 17 target including rdmadl compiled (raised to C++20?)"
fi
grep -q "rdmadl's C++ API needs C++20" "$tmp/build17.log" ||
  fail "C++17 target: not rdmadl's #error: $(head -20 "$tmp/build17.log")"
grep -q -- '-std=c++17 .*/main\.cpp' "$tmp/build17.log" ||
  fail "C++17 target not compiled with -std=c++17: $(head -5 "$tmp/build17.log")"
echo "C++17 target including rdmadl: refused with rdmadl's #error"

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

# (4) the C++ API through pkg-config: the plain line (what a shared install
# needs) and the --static one (what a static archive needs) both link.
for mode in plain static; do
  opt=""
  [ $mode = static ] && opt=--static
  # shellcheck disable=SC2086 # $opt is empty or one flag
  pc=$(pkg-config $opt --cflags --libs rdmadl) || fail "pkg-config $opt rdmadl failed"
  echo "pkg-config $opt rdmadl: $pc"
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  "$cxx" -std=c++20 $flags -o "$tmp/cxx_pc_$mode" "$here/consumer/main.cpp" $pc ||
    fail "C++ consumer (pkg-config $opt rdmadl) does not link"
  RDMADL_DISABLE=1 LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/cxx_pc_$mode" | tee "$tmp/cxx_pc.out"
  grep -q 'consumer: no stack.*: consistent' "$tmp/cxx_pc.out" ||
    fail "C++ consumer (pkg-config $opt rdmadl) inconsistent"
done

for exe in consumer/consumer_cxx consumer/consumer_cxx17 consumer/consumer_c demo_pc cxx_pc_plain \
  cxx_pc_static; do
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

# (6) the installed rdmadl-info, from the prefix, with no LD_LIBRARY_PATH:
# exit status 1 (no usable library) with RDMADL_DISABLE=1. A shared build
# finds librdmadl.so.0 through its RUNPATH $ORIGIN/../lib, also once the
# prefix has moved.
if [ -e "$tmp/prefix/bin/rdmadl-info" ]; then
  if [ -e "$tmp/prefix/lib/librdmadl.so.0" ]; then
    rp=$(readelf -d "$tmp/prefix/bin/rdmadl-info" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    # shellcheck disable=SC2016 # a literal $ORIGIN
    [ "$rp" = '$ORIGIN/../lib' ] || fail "installed rdmadl-info: RUNPATH '$rp', expected \$ORIGIN/../lib"
  fi
  mv "$tmp/prefix" "$tmp/moved"
  st=0
  env -u LD_LIBRARY_PATH RDMADL_DISABLE=1 "$tmp/moved/bin/rdmadl-info" >"$tmp/info.out" 2>&1 || st=$?
  [ $st -eq 1 ] || fail "installed rdmadl-info (moved prefix) exited $st, expected 1: $(cat "$tmp/info.out")"
  grep -q '^usable: no' "$tmp/info.out" || fail "installed rdmadl-info: no 'usable: no' line"
  mv "$tmp/moved" "$tmp/prefix"
  echo "installed rdmadl-info runs from its (moved) prefix without LD_LIBRARY_PATH"
fi
echo "install test: ok"
