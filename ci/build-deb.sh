#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-deb.sh [--out DIR]: builds rdmadl's Debian packages (debian/) from a
# copy of the source tree (the tree itself stays clean), with
# dpkg-buildpackage -us -uc -b, and checks them:
#   - librdmadl0, librdmadl-dev and rdmadl-tools are built; lintian finds no
#     error (its warnings are printed);
#   - no package depends on rdma-core (libibverbs1, librdmacm1, ...);
#   - the shared libraries' SONAMEs; rdmadl-info has no RUNPATH;
#   - from the unpacked librdmadl0 + librdmadl-dev, C++ and C consumers build
#     with pkg-config (rdmadl, rdmadl-verbs) and find_package, and run; the unpacked
#     rdmadl-tools' rdmadl-info exits 1 (no usable library) with
#     RDMADL_DISABLE=1;
#   - the source tree is as clean after as before.
# The .debs are left in DIR (default build/deb; the VM tier installs
# librdmadl0 and rdmadl-tools from there). Last line: "N passed, M failed".
# shellcheck disable=SC2317 # the functions run through check()
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/deb
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    *) echo "usage: build-deb.sh [--out DIR]" >&2; exit 2 ;;
  esac
done
passed=0 failed=0
ok() { echo "build-deb: PASS: $*"; passed=$((passed + 1)); }
bad() { echo "build-deb: FAIL: $*"; failed=$((failed + 1)); }
check() { # check NAME CMD...: a named check from a command's status
  local name=$1; shift
  if "$@"; then ok "$name"; else bad "$name"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

for tool in dpkg-buildpackage dh lintian cmake ninja pkg-config readelf; do
  command -v "$tool" >/dev/null || { bad "$tool is not installed (ci/install-deps.sh --deb)"; finish; }
done
version=$(sed -n '1s/^rdmadl (\([^)]*\)).*/\1/p' "$root/debian/changelog")
cmake_version=$(sed -n 's/^#define RDMADL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' \
  "$root/include/rdmadl/version.h" | paste -sd.)
check "debian/changelog's version ($version) is the library's ($cmake_version)" \
  test "$version" = "$cmake_version"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
before=""
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  before=$(git -C "$root" status --porcelain --ignored=no)
  # Tracked and untracked-but-not-ignored files: what a commit would hold.
  (cd "$root" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf -) |
    (mkdir -p "$tmp/rdmadl-$version" && tar -x -C "$tmp/rdmadl-$version")
else
  mkdir -p "$tmp/rdmadl-$version"
  tar -C "$root" --exclude='./build*' --exclude=./.git -cf - . | tar -x -C "$tmp/rdmadl-$version"
fi

start=$SECONDS
jobs=$(nproc)
if (cd "$tmp/rdmadl-$version" && DEB_BUILD_OPTIONS="parallel=$jobs" \
  dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1); then
  ok "dpkg-buildpackage -us -uc -b ($((SECONDS - start)) s)"
else
  tail -40 "$tmp/build.log"
  bad "dpkg-buildpackage -us -uc -b"
  finish
fi
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
mkdir -p "$out"
rm -f "$out"/*.deb
for pkg in librdmadl0 librdmadl-dev rdmadl-tools; do
  deb=$tmp/${pkg}_${version}_$arch.deb
  if [ -f "$deb" ]; then
    cp "$deb" "$out/"
    ok "$pkg built"
  else
    bad "$pkg not built"
  fi
done
[ "$failed" -eq 0 ] || finish

# lintian: errors fail, warnings are shown. (Source checks need a source
# build; the binary packages are what users install.)
lintian --tag-display-limit 0 "$tmp"/*.changes >"$tmp/lintian.log" 2>&1
sed 's/^/lintian: /' "$tmp/lintian.log"
if grep -q '^E: ' "$tmp/lintian.log"; then
  bad "lintian: $(grep -c '^E: ' "$tmp/lintian.log") error(s)"
else
  ok "lintian: no error ($(grep -c '^W: ' "$tmp/lintian.log") warning(s))"
fi

# Nothing depends on rdma-core: it is loaded at run time when present.
for pkg in librdmadl0 librdmadl-dev rdmadl-tools; do
  deps=$(dpkg-deb -f "$out/${pkg}_${version}_$arch.deb" Depends Pre-Depends Recommends)
  echo "build-deb: $pkg: $deps"
  case $deps in
    *libibverbs* | *librdmacm* | *rdma-core* | *ibverbs-providers*) bad "$pkg depends on rdma-core" ;;
    *) ok "$pkg does not depend on rdma-core" ;;
  esac
done

x=$tmp/root
for pkg in librdmadl0 librdmadl-dev rdmadl-tools; do dpkg-deb -x "$out/${pkg}_${version}_$arch.deb" "$x"; done
lib=$x/usr/lib/$multiarch
for so in librdmadl librdmadl-verbs librdmadl-ffi; do
  soname=$(readelf -d "$lib/$so.so.0" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  check "$so.so.0: SONAME $so.so.0" test "$soname" = "$so.so.0"
done
rp=$(readelf -d "$x/usr/bin/rdmadl-info" | grep -E 'R(UN)?PATH')
check "rdmadl-info has no RUNPATH ($rp)" test -z "$rp"
for f in usr/include/rdmadl/rdmadl.hpp usr/include/rdmadl/rdma/infiniband/verbs.h \
  "usr/lib/$multiarch/pkgconfig/rdmadl.pc" "usr/lib/$multiarch/pkgconfig/rdmadl-verbs.pc" \
  "usr/lib/$multiarch/cmake/rdmadl/rdmadlConfig.cmake" "usr/lib/$multiarch/librdmadl.a" \
  "usr/lib/$multiarch/librdmadl-loader.a"; do
  check "librdmadl-dev has /$f" test -e "$x/$f"
done

# Consumers from the unpacked packages: the .pc files are relocatable, so
# pointing PKG_CONFIG_PATH at the unpacked tree gives its include and lib dirs.
export PKG_CONFIG_PATH=$lib/pkgconfig
run_consumer() { # NAME EXPECTED-LINE COMPILER SOURCE PRE POST PKG-CONFIG-ARGS...
  local name=$1 want=$2 cc=$3 src=$4 pre=$5 post=$6; shift 6
  local flags
  flags=$(pkg-config "$@") || return 1
  # shellcheck disable=SC2086 # word splitting of the compiler and flags is intended
  $cc -o "$tmp/$name" "$src" $pre $flags $post || return 1
  RDMADL_DISABLE=1 LD_LIBRARY_PATH=$lib "$tmp/$name" | grep -q "$want"
}
main_cpp=$root/tests/install/consumer/main.cpp
check "C++ consumer: pkg-config --cflags --libs rdmadl" run_consumer cxx_shared \
  'consumer: no stack.*: consistent' "${CXX:-g++} -std=c++20" "$main_cpp" "" "" --cflags --libs rdmadl
check "C++ consumer: pkg-config --static --cflags --libs rdmadl (librdmadl.a)" run_consumer \
  cxx_static 'consumer: no stack.*: consistent' "${CXX:-g++} -std=c++20" "$main_cpp" \
  -Wl,-Bstatic -Wl,-Bdynamic --static --cflags --libs rdmadl
check "the --static C++ consumer needs no librdmadl.so.0" \
  sh -c "! readelf -d '$tmp/cxx_static' | grep -q 'librdmadl'"
check "C consumer: pkg-config --cflags --libs rdmadl-verbs" run_consumer c_dropin \
  'dropin-demo: consistent' "${CC:-gcc}" "$root/tests/dropin/dropin_demo.c" "" "" \
  --cflags --libs rdmadl-verbs
# find_package from the unpacked tree: the CMake package is relocatable too.
cmake_consumer() {
  if ! cmake -S "$root/tests/install/consumer" -B "$tmp/cmake-consumer" -DCMAKE_PREFIX_PATH="$x/usr" \
    -DDROPIN_SOURCE="$root/tests/dropin/dropin_demo.c" >"$tmp/cmake-consumer.log" 2>&1 ||
    ! cmake --build "$tmp/cmake-consumer" --target consumer_cxx >>"$tmp/cmake-consumer.log" 2>&1; then
    tail -20 "$tmp/cmake-consumer.log"
    return 1
  fi
  RDMADL_DISABLE=1 LD_LIBRARY_PATH=$lib "$tmp/cmake-consumer/consumer_cxx" |
    grep -q 'consumer: no stack.*: consistent'
}
check "C++ consumer: find_package(rdmadl) from librdmadl-dev" cmake_consumer
st=0
RDMADL_DISABLE=1 LD_LIBRARY_PATH=$lib "$x/usr/bin/rdmadl-info" >"$tmp/info.out" 2>&1 || st=$?
check "rdmadl-info (unpacked) exits 1 with RDMADL_DISABLE=1 (got $st)" test "$st" -eq 1

if [ -n "$before" ] || git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  after=$(git -C "$root" status --porcelain --ignored=no)
  check "the source tree is as clean as before" test "$before" = "$after"
fi
finish
