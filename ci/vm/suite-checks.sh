# SPDX-License-Identifier: MIT
# The host's checks of one suite of the Soft-RoCE tier (sourced by
# ci/test-vm.sh): its real libraries against ci/releases.txt and
# loader/symbols.def before the boot, and the guest's RDMADL-CHECK lines
# against ci/releases.txt after it. Uses test-vm.sh's results, logs, known,
# releases, imgdir and version.
# shellcheck shell=bash disable=SC2154,SC2004 # test-vm.sh's variables and arrays

# host_check SUITE NAME OK [DETAIL]: a check of the host's own, "NAME PASS|FAIL"
# in results/SUITE; a failure says why on stderr.
host_check() {
  local st=PASS
  [ "$3" = 1 ] || st=FAIL
  echo "$2 $st" >>"$results/$1"
  [ $st = PASS ] || echo "test-vm: $1: $2 FAILED${4:+: $4}" >&2
}

# exports LIB: "name node" for each public default-version symbol, plus
# ibv_register_driver's non-default IBVERBS_1.1 entry; IBVERBS_PRIVATE_* never.
exports() {
  readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $7 != "ABS" && $8 ~ /@/ {print $8}' |
    awk '/@@/ {split($0, a, "@@"); print a[1], a[2]; next}
         /^ibv_register_driver@IBVERBS_1\.1$/ {split($0, a, "@"); print a[1], a[2]}' |
    grep -v ' IBVERBS_PRIVATE' | LC_ALL=C sort -u
}

# release_column SUITE: SUITE's column among the release lines of releases.txt.
release_column() {
  awk -v s="$1" '$1 == "release" {n++; if ($2 == s) print n}' "$releases"
}

# suite_expect SUITE IMG LIST: writes LIST, the symbols (and "@node LIB NODE"
# lines) the guest's loader_diag and buf_pingpong expect of SUITE's image
# IMG; checks that rdmadl's table knows every exported name and that
# ci/releases.txt's version and feature declarations match the libraries.
suite_expect() {
  local s=$1 img=$2 list=$3 lib so f node unknown col declared feat sym rest want have
  local libdir=$img/sysroot/usr/lib/x86_64-linux-gnu
  : >"$list"
  # libibverbs and librdmacm must be there; the providers' direct-verbs
  # libraries and libibumad where the release ships them (loader_diag then
  # expects each one it is told a node of to load, and the others not found).
  for lib in libibverbs librdmacm libmlx5 libefa libmlx4 libhns libmana libionic libibumad; do
    so=$lib.so.1
    [ $lib != libibumad ] || so=$lib.so.3
    f=$(readlink -f "$libdir/$so") || f=""
    if [ ! -f "$f" ]; then
      case $lib in libibverbs | librdmacm) host_check "$s" "exports.$lib" 0 "no $so in $img/sysroot" ;; esac
      continue
    fi
    exports "$f" >"$logs/$s.$lib.exports"
    node=$(readelf -V -W "$f" | sed -n 's/.*Name: \([A-Z0-9]*_1\.[0-9.]*\)$/\1/p' | sort -uV | tail -n 1)
    echo "@node $lib $node" >>"$list"
    # A public name rdmadl's table does not know is a new release's addition:
    # fail loudly, so loader/symbols.def gets it.
    unknown=$(awk 'NR == FNR {k[$1] = 1; next} !($1 in k) {print $1 "@" $2}' "$known" "$logs/$s.$lib.exports")
    host_check "$s" "exports.$lib.known" "$([ -z "$unknown" ] && echo 1 || echo 0)" \
      "exported but not in loader/symbols.def: ${unknown//$'\n'/ }"
    awk 'NR == FNR {k[$1] = 1; next} ($1 in k)' "$known" "$logs/$s.$lib.exports" >>"$list"
  done
  # ci/releases.txt against the truth: the version, and each feature's symbol.
  col=$(release_column "$s")
  declared=$(awk -v s="$s" '$1 == "release" && $2 == s {print $3}' "$releases")
  host_check "$s" expect.version "$([ -n "$col" ] && [[ ${version[$s]} == "$declared"* ]] && echo 1 || echo 0)" \
    "image has rdma-core ${version[$s]}, ci/releases.txt says ${declared:-nothing}"
  while read -r _ feat sym rest; do
    [ "$sym" != - ] || continue
    want=$(echo "$rest" | awk -v c="$col" '{print $c}')
    have=no
    grep -q "^$sym " "$logs/$s.libibverbs.exports" && have=yes
    [ "$want" != device ] || want=yes # the library has it; the device does not
    [ "$want" != emulated ] || want=no # rdmadl's fallback stands in for it
    host_check "$s" "expect.declared.$feat" "$([ "$want" = "$have" ] && echo 1 || echo 0)" \
      "ci/releases.txt says $want, libibverbs ${version[$s]} exports $sym: $have"
  done < <(grep '^feature ' "$releases")
}

# suite_verdict SUITE: the guest's lines against ci/releases.txt (every
# required check reported; UNSUPPORTED only for a feature the release is
# declared to lack, PASS for one it has), then prints "CHECKS PASSED" of
# results/SUITE. UNSUPPORTED passes only for a declared-missing feature.
suite_verdict() {
  local s=$1 r=$results/$1 req unreported c col feat rest want got why exp
  local -A nofeat=()
  touch "$r"
  if [ -n "${imgdir[$s]:-}" ]; then
    if [ "$s" = none ]; then
      req=$(awk '$1 == "absent" {for (i = 2; i <= NF; i++) print $i}' "$releases")
    else
      req=$(awk '$1 == "checks" {for (i = 2; i <= NF; i++) print $i}' "$releases")
    fi
    unreported=""
    for c in $req; do
      grep -q "^$c " "$r" || unreported+=" $c"
    done
    host_check "$s" all-reported "$([ -z "$unreported" ] && echo 1 || echo 0)" \
      "$(wc -w <<<"$unreported") required checks never reported:$unreported"
    if [ "$s" != none ]; then
      col=$(release_column "$s")
      while read -r _ feat _ rest; do
        want=$(echo "$rest" | awk -v c="$col" '{print $c}')
        got=$(awk -v c="feature.$feat" '$1 == c {print $2; exit}' "$r")
        why=$(awk -v c="feature.$feat" '$1 == "RDMADL-WHY" && $2 == c {print $3; exit}' "$logs/$s.clean.log")
        case $want in
          yes | emulated) exp=PASS ;;
          no) exp="UNSUPPORTED library" ;;
          device) exp="UNSUPPORTED device" ;;
          *) exp="a valid declaration (yes/no/device/emulated, not '$want')" ;;
        esac
        [ "$want" = yes ] || [ "$want" = emulated ] || nofeat[feature.$feat]=1
        got="$got${why:+ $why}"
        host_check "$s" "expect.feature.$feat" "$([ "$got" = "$exp" ] && echo 1 || echo 0)" \
          "declared $want, guest reported ${got:-nothing} (want $exp)"
      done < <(grep '^feature ' "$releases")
    fi
  fi
  awk -v allowed=" ${!nofeat[*]} " '
    {n++} $2 == "PASS" {p++}
    $2 == "UNSUPPORTED" { if (index(allowed, " " $1 " ")) p++; else print "test-vm: unexpected UNSUPPORTED: " $1 > "/dev/stderr" }
    END {print n + 0, p + 0}' "$r"
}
