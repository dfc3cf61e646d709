#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# debfetch.sh: download Debian packages of any suite without touching the
# system's apt configuration.
#
#   debfetch.sh SUITE OUTDIR PKG[=VER]...  download PKG (VER, or the current version in SUITE)
#   debfetch.sh --version SUITE PKG      print PKG's candidate version in SUITE
#
# A private apt tree (sources, lists, cache) lives under $RDMADL_CACHE
# (default: ~/.cache/rdmadl/apt/SUITE). The archive's address is taken from
# the machine's own apt sources, so no mirror is named here. Downloads are
# cached under $RDMADL_CACHE/debs/SUITE keyed by file name (which carries the
# version), so a re-run does not fetch again. Lists are refreshed at most once
# every $RDMADL_APT_MAX_AGE seconds (default 6 h).
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

apt_opts() {
  local suite=$1 root=$cache/apt/$1
  echo "-o Dir::Etc::sourcelist=$root/sources.list -o Dir::Etc::sourceparts=- \
-o Dir::State=$root/state -o Dir::State::status=$root/state/status \
-o Dir::Cache=$root/cache -o APT::Get::List-Cleanup=0 \
-o Acquire::Languages=none -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
}

prepare() {
  local suite=$1 root=$cache/apt/$1 stamp max_age=${RDMADL_APT_MAX_AGE:-21600}
  mkdir -p "$root/state/lists/partial" "$root/cache/archives/partial"
  [ -f "$root/state/status" ] || : >"$root/state/status"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  local signed="signed-by=$keyring"
  [ -f "$keyring" ] || signed="trusted=yes"
  echo "deb [arch=amd64 $signed] $(mirror) $suite main" >"$root/sources.list"
  stamp=$root/state/updated
  if [ ! -f "$stamp" ] || [ $(( $(date +%s) - $(stat -c %Y "$stamp") )) -gt "$max_age" ]; then
    # shellcheck disable=SC2046
    if apt-get $(apt_opts "$suite") -q update >"$root/update.log" 2>&1; then
      touch "$stamp"
    elif [ ! -f "$stamp" ]; then
      cat "$root/update.log" >&2; die "apt-get update failed for $suite"
    else
      echo "debfetch: warning: could not refresh $suite lists, using cached ones" >&2
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
