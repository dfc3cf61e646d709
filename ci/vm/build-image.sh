#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-image.sh SUITE: kernel + base initramfs of the Soft-RoCE test VM for
# SUITE's userspace (bullseye, bookworm, trixie, sid, or none = no rdma-core),
# or for rc28/rc32: bookworm's userspace without any Debian rdma-core package
# and rdma-core 28.0/32.0 built from its upstream source instead
# (ci/build-rdma-core.sh, third_party/rdma-core-releases/).
# Prints the image directory (vmlinuz, base.cpio, sysroot/, contents, info).
#
# Cached under $RDMADL_CACHE/vm (default ~/.cache/rdmadl/vm):
#   manifests/SUITE   package versions in use; re-resolved at most every
#                     $RDMADL_VM_MAX_AGE s (default: $RDMADL_APT_MAX_AGE or 6 h)
#   kernels/...       vmlinuz + the few modules rxe needs, depmod'ed, per kernel version
#   images/SUITE-KEY  KEY = hash of the manifest and of these scripts
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

suite=${1:-}
case $suite in
  # bullseye's 5.10 kernel stalls (RCU) in atomics under TCG, so it runs on
  # bookworm's kernel. Our test binaries are built on the bookworm host and need
  # GLIBC_2.34 (bullseye has 2.31): bookworm's libc6/libgcc-s1/libstdc++6 are
  # laid over the bullseye tree; rdma-core 33.2 runs fine on them.
  bullseye) ksuite=bookworm libcsuite=bookworm ;;
  bookworm | none) ksuite=bookworm libcsuite=bookworm ;;
  trixie | sid) ksuite=$suite libcsuite=$suite ;;
  # 28.0's and 32.0's rxe provider drive bookworm's 6.1 rxe (the kernel ABI
  # of rxe has been stable since 4.x): see ci/vm/README.md.
  rc28 | rc32) ksuite=bookworm libcsuite=bookworm ;;
  *) die "usage: build-image.sh bullseye|bookworm|trixie|sid|none|rc28|rc32" ;;
esac
rdma=1; [ "$suite" != none ] || rdma=0
# pkgsuite: the Debian suite of the image's other packages. srcbuild: the
# rdma-core built from source (rc* only), its directory's name carrying the
# hash of the archive and of the build script.
pkgsuite=$suite srcbuild=""
case $suite in
  rc*)
    pkgsuite=$libcsuite
    srcbuild=$("$vm_here/../build-rdma-core.sh" "${suite#rc}.0") || die "ci/build-rdma-core.sh ${suite#rc}.0 failed"
    ;;
esac

# In load order. rdma_ucm for rdma_cm (rping), ib_uverbs for
# /dev/infiniband/uverbs*: nothing else loads them without udev. dummy gives
# rxe a netdev with an IPv4 address. rxe of kernels before 6.x's crc rework asks
# the crypto API for "crc32", which nobody loads for it. virtio_pci and
# virtio_net: the NIC of a cluster run (ci/vm/cluster.sh), loaded only there.
# "?": may be absent (or built in).
kmods="dummy crc32_generic? rdma_rxe ib_uverbs rdma_ucm virtio_pci? virtio_net"
max_age=${RDMADL_VM_MAX_AGE:-${RDMADL_APT_MAX_AGE:-21600}}

ensure_host_tools
mkdir -p "$vmcache/manifests" "$vmcache/kernels" "$vmcache/images"
# --- which packages -----------------------------------------------------------
spec="$libcsuite libc6
$libcsuite libgcc-s1
$libcsuite libstdc++6"
if [ $rdma = 1 ] && [ -z "$srcbuild" ]; then
  spec+="
$suite libibverbs1
$suite librdmacm1t64|librdmacm1
$suite ibverbs-providers
$suite libnl-3-200
$suite libnl-route-3-200
$suite ibverbs-utils
$suite rdmacm-utils
$suite perftest
$suite iproute2"
elif [ -n "$srcbuild" ]; then
  # What the source build links (libnl) and the rdma tool; Debian's perftest
  # is left out (built against a newer libibverbs than 28.0/32.0).
  spec+="
$pkgsuite libnl-3-200
$pkgsuite libnl-route-3-200
$pkgsuite iproute2"
fi
# --- python3 for librdmadl-ffi's ctypes test (tests/guest/ffi_pingpong.py) ---
# Debian's interpreter; of its minimal standard library the top-level modules,
# collections/, re/ and the UTF-8/ASCII/Latin-1 codecs; of the full one only
# ctypes (+ _ctypes, whose libffi comes in through the closure below). Run as
# "python3.X -S" (no site). The newest python3.X the suite has, the same X for
# all three packages (bullseye 3.9, bookworm 3.11, trixie 3.13, sid 3.15 now).
# Not in "none": the no-stack ctypes case runs on the host.
if [ $rdma = 1 ]; then
  pyalts="3.15 3.14 3.13 3.12 3.11 3.10 3.9"
  for pyp in python%s-minimal libpython%s-minimal libpython%s-stdlib; do
    spec+="
$pkgsuite $(for v in $pyalts; do printf "${pyp}|" "$v"; done | sed 's/|$//')"
  done
fi
python_wanted() { # PKG LIST: the files of the python packages the image needs
  case $1 in
    python3.*-minimal) grep -E '^/usr/bin/python3\.[0-9]+$' "$2" ;;
    libpython3.*-minimal)
      grep -E '^/usr/lib/python3\.[0-9]+/([^/]+|collections/[^/]+|re/[^/]+|encodings/(__init__|aliases|utf_8|ascii|latin_1))\.py$' "$2" ;;
    libpython3.*-stdlib) grep -E '^/usr/lib/python3\.[0-9]+/(ctypes/[^/]+\.py|lib-dynload/_ctypes\.[^/]*so)$' "$2" ;;
  esac
}
# --- end of python3 ---------------------------------------------------------
spec+="
kernel:$ksuite linux-image-amd64"
spec_id=$(printf '%s\n' "$spec" | sha256sum | cut -c1-16)

# resolve_top: "top SUITE PKG VER" (and "kernel ...") with today's candidates.
resolve_top() {
  local s p alt v
  while read -r s p; do
    for alt in ${p//|/ }; do
      v=$("$debfetch" --version "${s#kernel:}" "$alt")
      if [ -n "$v" ] && [ "$v" != "(none)" ]; then break; fi
    done
    if [ -z "$v" ] || [ "$v" = "(none)" ]; then die "no package $p in ${s#kernel:}"; fi
    case $s in kernel:*) echo "kernel ${s#kernel:} $alt $v" ;; *) echo "top $s $alt $v" ;; esac
  done <<<"$spec"
}

manifest=$vmcache/manifests/$suite
image_key() {
  { cat "$manifest" "$vm_here/lib.sh" "$vm_here/build-image.sh" "$vm_here/guest-init.sh"; echo "${srcbuild##*/}"; } |
    sha256sum | cut -c1-16
}
fresh_image() {
  [ -f "$manifest" ] && [ "$(head -n 1 "$manifest")" = "# spec $spec_id" ] &&
    [ $(($(date +%s) - $(stat -c %Y "$manifest"))) -le "$max_age" ] &&
    [ -f "$vmcache/images/$suite-$(image_key)/done" ]
}
# Warm path without the lock: manifests and images appear by rename only.
if fresh_image; then echo "$vmcache/images/$suite-$(image_key)"; exit 0; fi

# One build at a time: suites share the bookworm kernel and the apt trees.
exec 9>"$vmcache/build.lock"
flock 9
if fresh_image; then echo "$vmcache/images/$suite-$(image_key)"; exit 0; fi
work=$(mktemp -d "$vmcache/tmp.XXXXXX")
[ -n "${RDMADL_VM_KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT

have_manifest=0
if [ -f "$manifest" ] && [ "$(head -n 1 "$manifest")" = "# spec $spec_id" ]; then
  have_manifest=1
fi
top=""
if [ $have_manifest = 0 ] || [ $(($(date +%s) - $(stat -c %Y "$manifest"))) -gt "$max_age" ]; then
  say "checking package versions for $suite"
  top=$(resolve_top)
  if [ $have_manifest = 1 ] && [ "$top" = "$(grep -E '^(top|kernel) ' "$manifest")" ]; then
    touch "$manifest"; top=""
  fi
fi

if [ -z "$top" ]; then
  imgdir=$vmcache/images/$suite-$(image_key)
  if [ -f "$imgdir/done" ]; then echo "$imgdir"; exit 0; fi
fi

# --- sysroot: the suite's packages unpacked, plus library dependencies ------
pkgs_file=$work/pkgs # lines: SUITE PKG VER DEB
sysroot=$work/sysroot
merged_skeleton "$sysroot"
mkdir -p "$work/lists"

fetch_unpack() { # SUITE PKG[=VER]
  local deb pkg
  deb=$(fetch_deb "$1" "$work/dl" "$2")
  pkg=$(dpkg-deb -f "$deb" Package)
  unpack_deb "$deb" "$sysroot"
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||' | while read -r f; do canon "$f"; done >"$work/lists/$pkg"
  echo "$1 $pkg $(dpkg-deb -f "$deb" Version) $deb" >>"$pkgs_file"

}

# Files each package contributes to the image (its libraries come via closure).
wanted() { # PKG
  local l=$work/lists/$1 ma=$multiarch
  case $1 in
    libc6) grep -E "^/usr/lib/$ma/[^/]+\.so(\.[0-9.]+)?\$|^/usr/lib64/ld-linux" "$l" ;;
    iproute2) grep -E '^/usr/s?bin/(ip|rdma)$' "$l" ;;
    python3.* | libpython3.*) python_wanted "$1" "$l" ;; # the python3 block above
    # rxe's driver, and every direct-verbs library the release ships (rdmadl
    # loads them on demand; without their hardware they answer "not mine").
    ibverbs-providers) grep -E "/libibverbs/librxe-rdmav[0-9]+\.so\$|^/etc/libibverbs.d/rxe.driver\$|^/usr/lib/$ma/lib(mlx5|efa|mlx4|hns|mana|ionic)\.so\.[0-9.]+\$" "$l" ;;
    ibverbs-utils | rdmacm-utils | perftest) grep -E '^/usr/s?bin/[^/]+$' "$l" | grep -v raw_ethernet ;;
    # The source build (rc*): what libibverbs1, librdmacm1, ibverbs-providers
    # (rxe and the direct-verbs libraries), libibumad3, ibverbs-utils and
    # rdmacm-utils' rping would hold.
    rdma-core-src) grep -E "^/usr/lib/$ma/lib(ibverbs|rdmacm|mlx5|efa|mlx4|hns|mana|ionic)\.so\.[0-9.]+\$|^/usr/lib/$ma/libibumad\.so\.[0-9.]+\$|/libibverbs/librxe-rdmav[0-9]+\.so\$|^/etc/libibverbs\.d/rxe\.driver\$|^/usr/bin/(ibv_[a-z_]+|rping)\$" "$l" ;;
    lib*) grep -E "^/usr/lib/$ma/[^/]+\.so\.[0-9.]+\$" "$l" ;;
  esac || true
}

if [ -z "$top" ]; then
  # Known versions: the manifest lists every package, dependencies included.
  while read -r kind s p v; do
    case $kind in top | dep) fetch_unpack "$s" "$p=$v" ;; esac
  done <"$manifest"
else
  while read -r kind s p v; do
    [ "$kind" = top ] && fetch_unpack "$s" "$p=$v"
  done <<<"$top"
fi

if [ -n "$top" ]; then toplist=$top; else toplist=$(grep '^top ' "$manifest"); fi
if [ -n "$srcbuild" ]; then
  # The source-built rdma-core, installed over the sysroot as its packages would be.
  # Top-level bin, sbin, lib (udev rules) go under usr/, as unpack_deb does.
  for d in "$srcbuild"/root/*; do
    case ${d##*/} in
      bin | sbin | lib | lib64) mkdir -p "$sysroot/usr/${d##*/}"; cp -a "$d/." "$sysroot/usr/${d##*/}/" ;;
      *) cp -a "$d" "$sysroot/" ;;
    esac
  done
  (cd "$srcbuild/root" && find . -mindepth 1 ! -type d | sed 's|^\.||') |
    while read -r f; do canon "$f"; done >"$work/lists/rdma-core-src"
  echo "$pkgsuite rdma-core-src $(cat "$srcbuild/version") -" >>"$pkgs_file"
  toplist+=$'\n'"top $pkgsuite rdma-core-src $(cat "$srcbuild/version")"
fi

# Resolve the closure; pull in library dependencies of the packages we have
# (level by level, only while some soname is still missing).
pass=0
while :; do
  : >"$work/roots"
  while read -r s p _ _; do
    awk -v s="$s" -v p="$p" '$1 == "top" && $2 == s && $3 == p {f = 1} END {exit !f}' <<<"$toplist" || continue
    wanted "$p" >>"$work/roots"
  done <"$pkgs_file"
  mapfile -t roots <"$work/roots"
  files=()
  for f in "${roots[@]}"; do
    r=$(chase "$sysroot" "$f") || continue
    if is_elf "$sysroot$r"; then files+=("$sysroot$r"); fi
  done
  closure "$sysroot" "" "${files[@]}" >"$work/closure"
  missing=$(sed -n 's/^missing //p' "$work/closure" | tr '\n' ' ')
  [ -n "$missing" ] || break
  [ -n "$top" ] || die "manifest for $suite is incomplete (missing $missing); delete $manifest"
  pass=$((pass + 1)); [ $pass -le 8 ] || die "cannot resolve $missing for $suite"
  # Library packages only: name ends in a digit (or t64), per Debian's naming policy.
  # shellcheck disable=SC2094 # both only read pkgs_file
  new=$(while read -r s p v deb; do
    [ "$deb" != - ] || continue # the source build: no package
    dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*//; s/:any//; s/[[:space:]]//g' |
      grep -E '^lib.*[0-9](t64)?$|^zlib1g$' | sed "s/^/$s /"
  done <"$pkgs_file" | sort -u | while read -r s p; do
    awk -v p="$p" '$2 == p {f = 1} END {exit !f}' "$pkgs_file" || echo "$s $p"
  done)
  [ -n "$new" ] || die "$suite: no package provides $missing"
  say "$suite: resolving $missing-> fetching $(echo "$new" | awk '{print $2}' | tr '\n' ' ')"
  while read -r s p; do fetch_unpack "$s" "$p"; done <<<"$new"
done

if [ -n "$top" ]; then
  {
    echo "# spec $spec_id"
    printf '%s\n' "$top" | grep '^top '
    while read -r s p v deb; do
      [ "$deb" != - ] || continue # the source build is in the image key, not the manifest
      awk -v s="$s" -v p="$p" '$1 == "top" && $2 == s && $3 == p {f = 1} END {exit !f}' <<<"$top" ||
        echo "dep $s $p $v"
    done <"$pkgs_file"
    printf '%s\n' "$top" | grep '^kernel '
  } >"$manifest.new"
  mv "$manifest.new" "$manifest"
fi

key=$(image_key)
imgdir=$vmcache/images/$suite-$key
if [ -f "$imgdir/done" ]; then echo "$imgdir"; exit 0; fi

# --- kernel: vmlinuz and the modules rxe needs ---------------------------------
read -r _ _ _ kpkgver < <(grep '^kernel ' "$manifest")
modhash=$(echo "$kmods" | sha256sum | cut -c1-8)
kdir=$vmcache/kernels/$ksuite-$kpkgver-$modhash
if [ ! -f "$kdir/done" ]; then
  say "preparing $ksuite kernel $kpkgver"
  kx=$work/kernel
  mkdir -p "$kx/x"
  debs=("$(fetch_deb "$ksuite" "$work/kdl" "linux-image-amd64=$kpkgver")")
  # linux-image-amd64 -> linux-image-VER-amd64; sid splits that further into
  # linux-binary-* (vmlinuz) and linux-modules-*.
  i=0
  while [ $i -lt ${#debs[@]} ]; do
    for dep in $(dpkg-deb -f "${debs[$i]}" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*//; s/[[:space:]]//g' |
      grep -E '^linux-(image|binary|modules)-[0-9]'); do
      debs+=("$(fetch_deb "$ksuite" "$work/kdl" "$dep=$kpkgver")")
    done
    i=$((i + 1))
  done
  for deb in "${debs[@]}"; do dpkg-deb -x "$deb" "$kx/x"; done
  rm -rf "$work/kdl"
  vmlinuz=$(find "$kx/x" -type f \( -name 'vmlinuz-*' -o -name vmlinuz \) | head -n 1)
  moddir=$(find "$kx/x/lib/modules" "$kx/x/usr/lib/modules" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1 || true)
  if [ -z "$vmlinuz" ] || [ -z "$moddir" ]; then die "no vmlinuz/modules in $ksuite's kernel packages"; fi
  kver=${moddir##*/}
  cp "$vmlinuz" "$kx/vmlinuz" # sid keeps it in the modules directory
  # The packages carry no modules.dep: the image's depmod makes it (below).
  src=$moddir
  # sid's split packages have no modules.builtin/.order: keep depmod quiet.
  for f in modules.order modules.builtin modules.builtin.modinfo; do [ -f "$src/$f" ] || : >"$src/$f"; done
  rm -rf "$kdir.new"; mkdir -p "$kdir.new/root/lib/modules/$kver"
  dst=$kdir.new/root/lib/modules/$kver
  : >"$kdir.new/load"
  # Each wanted module and its dependencies, walked through the depends= of
  # each one's own modinfo: depmod over the whole tree read all of its 4,000
  # modules (on trixie and sid each one xz-decompressed) to answer for seven,
  # and was most of an image's CPU time. depmod runs on the few kept below.
  declare -A modrel=() kept=()
  while read -r rel; do
    n=${rel##*/}; n=${n%%.ko*}; modrel[${n//-/_}]=$rel
  done < <(cd "$src" && find . -name '*.ko' -o -name '*.ko.xz' -o -name '*.ko.zst' -o -name '*.ko.gz' | sed 's|^\./||')
  keep_module() { # NAME: copies NAME and what it depends on into $dst, decompressed
    local n=${1//-/_} rel out dep deps
    [ -z "${kept[$n]:-}" ] || return 0
    kept[$n]=1
    rel=${modrel[$n]:-}
    [ -n "$rel" ] || die "module $1 (a dependency) not in $ksuite kernel $kver"
    out=$dst/$rel; out=${out%.xz}; out=${out%.zst}; out=${out%.gz}
    mkdir -p "$(dirname "$out")"
    case $rel in
      *.xz) xz -dc "$src/$rel" >"$out" ;;
      *.zst) zstd -qdc "$src/$rel" >"$out" ;;
      *.gz) gzip -dc "$src/$rel" >"$out" ;;
      *) cp "$src/$rel" "$out" ;;
    esac
    deps=$(modinfo -F depends "$out") || die "modinfo cannot read $rel of $ksuite kernel $kver"
    for dep in ${deps//,/ }; do keep_module "$dep"; done
  }
  for m in $kmods; do
    case $m in *\?) m=${m%\?} opt=1 ;; *) opt="" ;; esac
    n=${m//-/_}
    if [ -z "${modrel[$n]:-}" ]; then
      pat=${m//[-_]/[-_]}
      if ! grep -qE "/${pat}\.ko\$" "$src/modules.builtin" && [ -z "$opt" ]; then
        [ -s "$src/modules.builtin" ] || { say "warning: $m is no module of $kver; assuming it is built in"; continue; }
        die "module $m not in $ksuite kernel $kver"
      fi
      continue
    fi
    echo "$m" >>"$kdir.new/load"
    keep_module "$m"
  done
  cp "$src"/modules.builtin "$src"/modules.builtin.modinfo "$src/modules.order" "$dst/"
  depmod -b "$kdir.new/root" "$kver"
  cp "$kx/vmlinuz" "$kdir.new/vmlinuz"
  echo "$kver" >"$kdir.new/kver"
  touch "$kdir.new/done"
  rm -rf "$kdir"; mv "$kdir.new" "$kdir"
  rm -rf "$kx"
fi
kver=$(cat "$kdir/kver")

# TCG spends 3-4 s of every boot decompressing vmlinuz; QEMU can load the
# uncompressed ELF directly through its PVH entry point (XEN_ELFNOTE_PHYS32_ENTRY,
# note type 0x12; Debian builds CONFIG_PVH) and skip the firmware path too.
if [ ! -f "$kdir/vmlinux" ] && [ ! -f "$kdir/no-pvh" ]; then
  for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -qdc' '\x1f\x8b\x08:gzip -dc'; do
    for off in $(LC_ALL=C grep -obUaP "${magic%%:*}" "$kdir/vmlinuz" | head -n 4 | cut -d: -f1); do
      tail -c +$((off + 1)) "$kdir/vmlinuz" | ${magic#*:} >"$kdir/vmlinux.new" 2>/dev/null || true
      if readelf -nW "$kdir/vmlinux.new" 2>/dev/null | grep -q '(0x00000012)'; then
        mv "$kdir/vmlinux.new" "$kdir/vmlinux"; break 2
      fi
    done
  done
  rm -f "$kdir/vmlinux.new"
  [ -f "$kdir/vmlinux" ] || { say "no PVH entry in $kver: booting the compressed kernel"; touch "$kdir/no-pvh"; }
fi

# --- the image ----------------------------------------------------------------
say "assembling $suite image"
st=$work/stage
merged_skeleton "$st"
mkdir -p "$st"/{dev,proc,sys,tmp,run,root,etc,payload,var/tmp}
{
  cat "$work/roots"
  sed -n 's/^lib //p' "$work/closure"
} | sort -u | while read -r p; do
  [ -e "$sysroot$p" ] || [ -L "$sysroot$p" ] || continue
  copy_into "$sysroot" "$st" "$p"
done
# Every image carries the modules (none's too: a cluster node needs virtio_net;
# like any stock Debian kernel, it has rdma_rxe.ko on disk but never loads it).
mkdir -p "$st/usr/lib"
cp -a "$kdir/root/lib/modules" "$st/usr/lib/"
# The shell and basic tools, static so they do not care about the suite's libc.
cp /bin/busybox "$st/usr/bin/busybox"
for a in $(/bin/busybox --list); do
  case $a in busybox | linuxrc | init) continue ;; esac
  [ -e "$st/usr/bin/$a" ] || [ -e "$st/usr/sbin/$a" ] || ln -s busybox "$st/usr/bin/$a"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$st/etc/passwd"
printf 'root:x:0:\n' >"$st/etc/group"
printf '127.0.0.1 localhost\n192.0.2.1 rdmadl-guest\n::1 localhost\n' >"$st/etc/hosts"
ver_of() { awk -v p="$1" '$1 != "kernel" && $3 == p {print $4; exit}' "$manifest"; }
{
  echo "SUITE=$suite"
  echo "HAVE_RDMA=$rdma"
  echo "KERNEL=$kver"
  echo "GLIBC=$(ver_of libc6)"
  if [ -n "$srcbuild" ]; then echo "RDMA_CORE=$(cat "$srcbuild/version")"; else echo "RDMA_CORE=$(ver_of libibverbs1)"; fi
  [ $rdma = 0 ] || echo "MODULES=\"$(grep -vE '^(dummy|virtio_.*)$' "$kdir/load" | tr '\n' ' ')\""
  echo "NETMODULES=\"$(grep -E '^virtio_' "$kdir/load" | tr '\n' ' ')\""
} >"$st/etc/rdmadl-image"
cp "$vm_here/guest-init.sh" "$st/init"
chmod 755 "$st/init"

rm -rf "$imgdir.new"; mkdir -p "$imgdir.new"
(cd "$st" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$imgdir.new/base.cpio"
(cd "$st" && find . -mindepth 1 | sed 's|^\.||') | LC_ALL=C sort >"$imgdir.new/contents"
for f in vmlinuz vmlinux; do
  [ ! -f "$kdir/$f" ] || ln "$kdir/$f" "$imgdir.new/$f" 2>/dev/null || cp "$kdir/$f" "$imgdir.new/$f"
done
cp "$manifest" "$imgdir.new/manifest"
cp "$st/etc/rdmadl-image" "$imgdir.new/info"
mv "$sysroot" "$imgdir.new/sysroot"
touch "$imgdir.new/done"
rm -rf "$imgdir"; mv "$imgdir.new" "$imgdir"
# Old images of this suite that nobody booted for two days go.
find "$vmcache/images" -mindepth 1 -maxdepth 1 -name "$suite-*" ! -name "$suite-$key" -mtime +2 \
  -exec rm -rf {} + 2>/dev/null || true
touch "$kdir"
find "$vmcache/kernels" -mindepth 1 -maxdepth 1 -mtime +7 -exec rm -rf {} + 2>/dev/null || true
say "$suite image: $imgdir ($(du -sh "$imgdir/base.cpio" | cut -f1) initramfs, kernel $kver)"
echo "$imgdir"
