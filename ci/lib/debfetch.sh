#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# debfetch.sh: download Debian packages of any suite without touching the
# system's apt configuration.
#
#   debfetch.sh SUITE OUTDIR PKG[=VER]...  download PKG (VER, or the current version in SUITE)
#   debfetch.sh --version SUITE PKG      print PKG's candidate version in SUITE
#   debfetch.sh --source-version SUITE SRCPKG   print the source package's version in SUITE
#   debfetch.sh --source SUITE OUTDIR SRCPKG[=VER]
#                                        download a source package and unpack it as
#                                        dpkg-source -x would (3.0 quilt: the orig
#                                        tarball, debian/ over it, debian/patches
#                                        applied) into OUTDIR/SRCPKG-VER; prints that
#
# A private apt tree (sources, lists, cache) lives under $RDMADL_CACHE
# (default: ~/.cache/rdmadl/apt/SUITE). The archive's address is taken from
# the machine's own apt sources, so no mirror is named here. Downloads are
# cached under $RDMADL_CACHE/debs/SUITE keyed by file name (which carries the
# version), so a re-run does not fetch again. Lists are refreshed at most once
# every $RDMADL_APT_MAX_AGE seconds (default 6 h). Source packages have their
# own tree ($RDMADL_CACHE/apt/SUITE-src, a deb-src line only, so binary look-ups
# never fetch the Sources index) and cache ($RDMADL_CACHE/sources/SUITE); each
# file is checked against the SHA256 of the signed index that apt verified. The
# .dsc is only fetched when the archive has it: its checksums are the index's.
set -euo pipefail

cache=${RDMADL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdmadl}

die() { echo "debfetch: $*" >&2; exit 1; }

mirror() {
  local uri=""
  if [ -n "${RDMADL_DEBIAN_MIRROR:-}" ]; then echo "$RDMADL_DEBIAN_MIRROR"; return; fi
  # deb822 sources first, then one-line sources; the first "debian" archive wins.
  uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '{print $2}' | grep -v -- '-security' | grep '/debian/\?$' | head -n 1 || true)
  if [ -z "$uri" ]; then
    uri=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          awk '{for(i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' |
          grep -v -- '-security' | head -n 1 || true)
  fi
  [ -n "$uri" ] || die "cannot find a Debian archive in /etc/apt sources (set RDMADL_DEBIAN_MIRROR)"
  echo "${uri%/}"
}

apt_opts() { # SUITE (a binary tree) or SUITE-src (a source tree)
  local root=$cache/apt/$1
  echo "-o Dir::Etc::sourcelist=$root/sources.list -o Dir::Etc::sourceparts=- \
-o Dir::State=$root/state -o Dir::State::status=$root/state/status \
-o Dir::Cache=$root/cache -o APT::Get::List-Cleanup=0 \
-o Acquire::Languages=none -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
}

prepare() { # SUITE [deb-src]
  local suite=$1 kind=${2:-deb} tree=$1 stamp max_age=${RDMADL_APT_MAX_AGE:-21600}
  [ "$kind" = deb ] || tree=$suite-src
  local root=$cache/apt/$tree
  mkdir -p "$root/state/lists/partial" "$root/cache/archives/partial"
  [ -f "$root/state/status" ] || : >"$root/state/status"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  local signed="signed-by=$keyring"
  [ -f "$keyring" ] || signed="trusted=yes"
  echo "$kind [arch=amd64 $signed] $(mirror) $suite main" >"$root/sources.list"
  stamp=$root/state/updated
  if [ ! -f "$stamp" ] || [ $(( $(date +%s) - $(stat -c %Y "$stamp") )) -gt "$max_age" ]; then
    # shellcheck disable=SC2046
    if apt-get $(apt_opts "$tree") -q update >"$root/update.log" 2>&1; then
      touch "$stamp"
    elif [ ! -f "$stamp" ]; then
      cat "$root/update.log" >&2; die "apt-get update failed for $tree"
    else
      echo "debfetch: warning: could not refresh $tree lists, using cached ones" >&2
    fi
  fi
}

if [ "${1:-}" = "--version" ]; then
  [ $# -eq 3 ] || die "usage: debfetch.sh --version SUITE PKG"
  prepare "$2"
  # shellcheck disable=SC2046
  apt-cache $(apt_opts "$2") policy "$3" | awk '/Candidate:/ {print $2}'
  exit 0
fi

source_version() { # SUITE SRCPKG: the highest version of SRCPKG the suite's index has
  # shellcheck disable=SC2046
  apt-cache $(apt_opts "$1-src") showsrc --only-source "$2" 2>/dev/null |
    awk '/^Version:/ {print $2}' | sort -V | tail -n 1
}

if [ "${1:-}" = "--source-version" ]; then
  [ $# -eq 3 ] || die "usage: debfetch.sh --source-version SUITE SRCPKG"
  prepare "$2" deb-src
  source_version "$2" "$3"
  exit 0
fi

if [ "${1:-}" = "--source" ]; then
  [ $# -eq 4 ] || die "usage: debfetch.sh --source SUITE OUTDIR SRCPKG[=VER]"
  suite=$2 out=$3 pkg=${4%%=*} ver=""
  [ "$4" = "$pkg" ] || ver=${4#*=}
  prepare "$suite" deb-src
  [ -n "$ver" ] || ver=$(source_version "$suite" "$pkg")
  [ -n "$ver" ] || die "no source package $pkg in $suite"
  # shellcheck disable=SC2046
  format=$(apt-cache $(apt_opts "$suite-src") showsrc --only-source "$pkg" |
    awk -v v="$ver" '/^Version:/ {hit = ($2 == v)} hit && /^Format:/ {print $2, $3; exit}')
  case $format in
    "3.0 (quilt)" | "3.0 (native)") ;;
    *) die "$pkg $ver: source format '${format:-unknown}' is not supported (3.0 quilt or native)" ;;
  esac
  store=$cache/sources/$suite
  mkdir -p "$store" "$out"
  # "'URI' FILE SIZE SHA256:HASH", one line per file of the source package.
  # shellcheck disable=SC2046
  uris=$(apt-get $(apt_opts "$suite-src") -q source --print-uris "$pkg=$ver" 2>/dev/null | grep "^'") ||
    die "source package $pkg=$ver not in the $suite index"
  while read -r uri file _ hash; do
    uri=${uri//\'/}
    [ ! -s "$store/$file" ] || continue
    if ! /usr/lib/apt/apt-helper -o APT::Sandbox::User=root download-file "$uri" "$store/$file.part" "$hash" \
      >"$store/$file.log" 2>&1; then
      rm -f "$store/$file.part"
      case $file in *.dsc) rm -f "$store/$file.log"; continue ;; esac # metadata only (see the top)
      cat "$store/$file.log" >&2; die "download of $file ($pkg=$ver, $suite) failed"
    fi
    mv "$store/$file.part" "$store/$file"
    rm -f "$store/$file.log"
  done <<<"$uris"
  # Unpack as dpkg-source -x does, without needing dpkg-dev.
  upstream=${ver#*:}; upstream=${upstream%-*}
  dir=$out/$pkg-$upstream
  rm -rf "$dir" "$dir.tmp"; mkdir -p "$dir.tmp"
  files=$(awk '{print $2}' <<<"$uris")
  orig=$(grep -E '\.orig\.tar\.[a-z0-9]+$' <<<"$files" || grep -E '\.tar\.[a-z0-9]+$' <<<"$files") ||
    die "$pkg=$ver has no tarball"
  tar -xf "$store/$(head -n 1 <<<"$orig")" -C "$dir.tmp"
  top=$(find "$dir.tmp" -mindepth 1 -maxdepth 1)
  if [ "$(wc -l <<<"$top")" = 1 ] && [ -d "$top" ]; then mv "$top" "$dir"; rmdir "$dir.tmp"; else mv "$dir.tmp" "$dir"; fi
  for f in $(grep -E '\.orig-[A-Za-z0-9-]+\.tar\.[a-z0-9]+$' <<<"$files" || true); do
    comp=${f##*.orig-}; comp=${comp%%.tar.*}
    mkdir -p "$dir/$comp" && tar -xf "$store/$f" -C "$dir/$comp" --strip-components=1
  done
  deb=$(grep -E '\.debian\.tar\.[a-z0-9]+$' <<<"$files" || true)
  if [ -n "$deb" ]; then
    rm -rf "$dir/debian"
    tar -xf "$store/$deb" -C "$dir"
    if [ -f "$dir/debian/patches/series" ]; then
      # quilt's series: one patch a line, "#" comments, an optional -pN.
      while read -r p opt; do
        case $p in "" | \#*) continue ;; esac
        patch -d "$dir" -s -f -N --no-backup-if-mismatch "${opt:--p1}" <"$dir/debian/patches/$p" ||
          die "$pkg=$ver: debian/patches/$p does not apply"
      done <"$dir/debian/patches/series"
    fi
  fi
  echo "$dir"
  exit 0
fi

[ $# -ge 3 ] || die "usage: debfetch.sh SUITE OUTDIR PKG..."
suite=$1 out=$2; shift 2
prepare "$suite"
mkdir -p "$out" "$cache/debs/$suite"
for spec in "$@"; do
  # PKG or PKG=VERSION (an exact version that the suite must still carry).
  pkg=${spec%%=*} ver=""
  [ "$spec" = "$pkg" ] || ver=${spec#*=}
  if [ -z "$ver" ]; then
    # shellcheck disable=SC2046
    ver=$(apt-cache $(apt_opts "$suite") policy "$pkg" | awk '/Candidate:/ {print $2}')
  fi
  [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no package $pkg in $suite"
  # shellcheck disable=SC2046
  arch=$(apt-cache $(apt_opts "$suite") show "$pkg=$ver" | awk '/^Architecture:/ {print $2; exit}')
  # apt-get download keeps an epoch in the file name, escaped as %3a.
  file="${pkg}_${ver//:/%3a}_${arch}.deb"
  if [ ! -s "$cache/debs/$suite/$file" ]; then
    # shellcheck disable=SC2046
    (cd "$cache/debs/$suite" && apt-get $(apt_opts "$suite") -q download "$pkg=$ver" >/dev/null) ||
      die "download of $pkg=$ver from $suite failed"
  fi
  cp -f "$cache/debs/$suite/$file" "$out/"
  echo "$out/$file"
done
