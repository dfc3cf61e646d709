# SPDX-License-Identifier: MIT
# Helpers shared by build-image.sh and run.sh (sourced, not run).
# shellcheck shell=bash disable=SC2034 # variables for the sourcing scripts

vm_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
debfetch=$vm_here/../lib/debfetch.sh
cache=${RDMADL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmadl}
vmcache=$cache/vm
multiarch=x86_64-linux-gnu

die() { echo "${0##*/}: error: $*" >&2; exit 1; }
say() { echo "${0##*/}: $*" >&2; }

# CI machines are fresh: install what the VM tier needs instead of assuming it.
ensure_host_tools() {
  local -A want=([qemu-system-x86_64]=qemu-system-x86 [cpio]=cpio [depmod]=kmod
                 [readelf]=binutils [xz]=xz-utils [zstd]=zstd [flock]=util-linux
                 [dpkg-deb]=dpkg [apt-get]=apt)
  local cmd pkgs=()
  for cmd in "${!want[@]}"; do
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || pkgs+=("${want[$cmd]}")
  done
  # Debian's static busybox: the guest's shell and tools, independent of each suite's libc.
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' ||
    pkgs+=(busybox-static)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing host packages (install them): ${pkgs[*]}"
  say "installing host packages: ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >&2; } ||
    die "could not install ${pkgs[*]}"
}

# Everything in the images is usr-merged; package paths under /lib, /bin... map to /usr.
canon() {
  case $1 in
    /lib/* | /lib64/* | /bin/* | /sbin/*) printf '/usr%s\n' "$1" ;;
    *) printf '%s\n' "$1" ;;
  esac
}

# chase ROOT PATH: follow symlinks of PATH's last component inside ROOT (an
# absolute link target must not escape to the host's files).
chase() {
  local root=$1 p=$2 t n=0
  while [ -L "$root$p" ]; do
    t=$(readlink "$root$p")
    case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac
    n=$((n + 1)); [ $n -lt 32 ] || return 1
  done
  printf '%s\n' "$p"
}

is_elf() {
  [ -f "$1" ] && [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' \n')" = '177ELF' ]
}

# closure ROOT SATISFIED FILE...: the shared-library closure of host files
# FILE..., looked up in ROOT's default library directories (never the host's).
# Prints "lib PATH-IN-ROOT" per library and "missing SONAME" per unresolved name.
# SATISFIED is a space-separated list of sonames provided elsewhere (e.g. a payload's lib/).
closure() {
  local root=$1 satisfied=" $2 " f so d p rp rest found
  shift 2
  local -a queue=("$@")
  local -A seen=() done_so=()
  for so in $satisfied; do done_so[$so]=1; done
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    [ -z "${seen[$f]:-}" ] || continue
    seen[$f]=1
    local -a dirs=()
    # RUNPATH/RPATH first, with $ORIGIN relative to the object itself.
    for rp in $(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' | tr ':' ' '); do
      # shellcheck disable=SC2016 # literal $ORIGIN
      case $rp in
        '${ORIGIN}'*) rest=${rp#'${ORIGIN}'}; dirs+=("$(dirname "$f")$rest") ;;
        '$ORIGIN'*) rest=${rp#'$ORIGIN'}; dirs+=("$(dirname "$f")$rest") ;;
        /*) dirs+=("$root$(canon "$rp")") ;;
      esac
    done
    dirs+=("$root/usr/lib/$multiarch" "$root/usr/lib")
    for so in $(readelf -dW "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [ -z "${done_so[$so]:-}" ] || continue
      found=
      for d in "${dirs[@]}"; do
        case $d in
          "$root"/*)
            p=$(chase "$root" "${d#"$root"}/$so") || continue
            if [ -f "$root$p" ]; then
              found=1; echo "lib ${d#"$root"}/$so"; queue+=("$root$p"); break
            fi ;;
          *)
            if [ -f "$d/$so" ]; then found=1; queue+=("$(readlink -f "$d/$so")"); break; fi ;;
        esac
      done
      if [ -n "$found" ]; then done_so[$so]=1; else echo "missing $so"; done_so[$so]=1; fi
    done
  done
}

# copy_into ROOT IMG PATH: copy PATH (inside ROOT) to the same place in IMG,
# with every symlink on the way, so sonames stay symlinks to real files.
copy_into() {
  local root=$1 img=$2 p=$3 t n=0 dst
  while :; do
    dst=$img$(canon "$p")
    mkdir -p "$(dirname "$dst")"
    [ -e "$dst" ] || [ -L "$dst" ] || cp -a "$root$p" "$dst"
    [ -L "$root$p" ] || break
    t=$(readlink "$root$p")
    case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac
    n=$((n + 1)); [ $n -lt 32 ] || die "symlink loop at $p in $root"
  done
}

# Make a usr-merged skeleton like current Debian's.
merged_skeleton() {
  local d=$1
  mkdir -p "$d/usr/bin" "$d/usr/sbin" "$d/usr/lib/$multiarch" "$d/usr/lib64"
  ln -sfn usr/bin "$d/bin"; ln -sfn usr/sbin "$d/sbin"
  ln -sfn usr/lib "$d/lib"; ln -sfn usr/lib64 "$d/lib64"
}

# unpack_deb DEB ROOT: dpkg -x into a usr-merged ROOT (the older suites' packages
# still ship /lib and /bin, which must not replace ROOT's symlinks).
unpack_deb() {
  local deb=$1 root=$2 tmp top
  tmp=$(mktemp -d "$root.unpack.XXXXXX")
  dpkg-deb -x "$deb" "$tmp"
  for top in bin sbin lib lib64; do
    if [ -d "$tmp/$top" ] && [ ! -L "$tmp/$top" ]; then
      mkdir -p "$root/usr/$top"; cp -a "$tmp/$top/." "$root/usr/$top/"; rm -rf "${tmp:?}/$top"
    fi
  done
  cp -a "$tmp/." "$root/"
  rm -rf "$tmp"
}

# fetch_deb SUITE OUTDIR PKG[=VER]: debfetch.sh, printing the .deb's path.
# debfetch.sh looks for PKG_VER_ARCH.deb with the epoch cut off, but apt-get
# download keeps it URL-encoded (libbpf1_1%3a1.1.2-...): pick that file up.
fetch_deb() {
  local s=$1 out=$2 spec=$3 pkg f ver
  pkg=${spec%%=*}
  if [ "$pkg" != "$spec" ]; then
    # An exact version already in debfetch.sh's cache (named as apt-get download
    # names it): skip its two apt look-ups per package, which made a rebuild slow.
    ver=${spec#*=}
    for f in "$cache/debs/$s/${pkg}_${ver#*:}"_*.deb "$cache/debs/$s/${pkg}_${ver%%:*}%3a${ver#*:}"_*.deb; do
      if [ -s "$f" ]; then echo "$f"; return 0; fi
    done
  fi
  if "$debfetch" "$s" "$out" "$spec" 2>"$out.err" | tail -n 1; then return 0; fi
  ver=${spec#*=}; [ "$ver" != "$spec" ] || ver=$("$debfetch" --version "$s" "$pkg")
  f=$(find "$cache/debs/$s" -maxdepth 1 -name "${pkg}_${ver%%:*}%3a${ver#*:}_*.deb" | head -n 1)
  [ -n "$f" ] || { cat "$out.err" >&2; die "could not fetch $spec from $s"; }
  mkdir -p "$out"; cp -f "$f" "$out/"; echo "$out/${f##*/}"
}

# payload_cpio SUITE IMGDIR STAGE OUT: the newc archive OUT of STAGE (which holds
# payload/), plus the libraries of SUITE's image sysroot that the payload's ELF
# files need and the image lacks (see README.md, "Payload contract").
payload_cpio() {
  local suite=$1 imgdir=$2 st=$3 out=$4 sysroot=$2/sysroot own added kind p
  local -a elves
  mapfile -t elves < <(find "$st/payload" -type f | while read -r f; do if is_elf "$f"; then echo "$f"; fi; done)
  if [ ${#elves[@]} -gt 0 ]; then
    own=""
    [ ! -d "$st/payload/lib" ] || own=$(find "$st/payload/lib" -maxdepth 1 \( -type f -o -type l \) -printf '%f ')
    closure "$sysroot" "$own" "${elves[@]}" >"$out.closure"
    added=0
    while read -r kind p; do
      case $kind in
        lib)
          if ! grep -qxF "$(canon "$p")" "$imgdir/contents"; then copy_into "$sysroot" "$st" "$p"; added=$((added + 1)); fi ;;
        missing) say "warning: $p (needed by the payload) is not in the $suite image" ;;
      esac
    done <"$out.closure"
    [ $added = 0 ] || say "added $added libraries from $suite for the payload"
  fi
  (cd "$st" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out"
  rm -f "$out.closure"
}

# The machine's QEMU slots: files $RDMADL_VM_LOCK (default
# /tmp/rdmadl-vm-qemu.lock), $RDMADL_VM_LOCK.1, ..., $RDMADL_VM_SLOTS of them
# (default 2 on 2 or more cores, else 1), each flock'ed by whoever uses it. A
# single-node boot (run.sh) holds one slot, a cluster (cluster.sh) all of them:
# two single-node guests share the machine, a cluster has it to itself.
vm_slot_count() {
  local n=${RDMADL_VM_SLOTS:-}
  if [ -z "$n" ]; then n=1; [ "$(nproc)" -lt 2 ] || n=2; fi
  case $n in '' | *[!0-9]* | 0) die "RDMADL_VM_SLOTS wants a number of at least 1" ;; esac
  echo "$n"
}
vm_slot_file() { # I
  local base=${RDMADL_VM_LOCK:-/tmp/rdmadl-vm-qemu.lock}
  if [ "$1" = 0 ]; then echo "$base"; else echo "$base.$1"; fi
}
vm_lock_fds=()
# vm_lock_one: takes the first free slot, waiting (polling) while none is.
vm_lock_one() {
  local n i fd said=0
  n=$(vm_slot_count)
  while :; do
    for ((i = 0; i < n; i++)); do
      exec {fd}>"$(vm_slot_file "$i")"
      if flock -n "$fd"; then vm_lock_fds=("$fd"); return 0; fi
      exec {fd}>&-
    done
    [ $said = 1 ] || say "every QEMU slot of this machine is taken ($n); waiting"
    said=1
    sleep 2
  done
}
# vm_lock_all: takes every slot, in order (so two of these never deadlock).
vm_lock_all() {
  local n i fd said=0
  n=$(vm_slot_count)
  for ((i = 0; i < n; i++)); do
    exec {fd}>"$(vm_slot_file "$i")"
    if ! flock -n "$fd"; then
      [ $said = 1 ] || say "another test VM is running on this machine; waiting for it"
      said=1
      flock "$fd"
    fi
    vm_lock_fds+=("$fd")
  done
}
vm_unlock() {
  local fd
  for fd in "${vm_lock_fds[@]}"; do flock -u "$fd"; exec {fd}>&-; done
  vm_lock_fds=()
}

# vm_accel SMP: sets accel (kvm or tcg) and accel_args (QEMU options) from
# $RDMADL_VM_ACCEL (auto, kvm, tcg). /dev/kvm can be PVM (kvm_pvm, no vmx/svm),
# which cannot run a stock kernel: auto falls back to TCG there.
vm_accel() {
  accel=${RDMADL_VM_ACCEL:-auto}
  if [ "$accel" = auto ]; then
    accel=tcg
    if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then accel=kvm; fi
  fi
  case $accel in
    kvm) accel_args=(-accel kvm -cpu host -smp "$1") ;;
    tcg) accel_args=(-accel "tcg,thread=multi" -cpu max -smp "$1") ;;
    *) die "RDMADL_VM_ACCEL must be auto, kvm or tcg" ;;
  esac
}
