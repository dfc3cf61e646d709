#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Re-imports the rdma-core source archives the VM tier builds its oldest
# releases from (ci/build-rdma-core.sh): `git archive`s of the upstream tags,
# unmodified, named rdma-core-VERSION.tar.xz. Each one must match SHA256SUMS
# here; its licence files are copied to licenses/VERSION/.
# Usage: third_party/rdma-core-releases/import.sh DIR    copy DIR's archives in, then check
#        third_party/rdma-core-releases/import.sh --check   check the bundled archives only
# To make an archive from a clone of the upstream repository:
#   git archive --format=tar --prefix=rdma-core-28.0/ v28.0 | xz -9 >rdma-core-28.0.tar.xz
# (a different xz may compress differently: then SHA256SUMS, reviewed, changes too).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: import.sh DIR | --check}
mapfile -t files < <(awk '{print $2}' "$here/SHA256SUMS")
if [ "$src" != --check ]; then
  for f in "${files[@]}"; do
    [ -f "$src/$f" ] || { echo "import: no $f in $src" >&2; exit 1; }
    (cd "$src" && grep " $f\$" "$here/SHA256SUMS" | sha256sum --quiet -c -) ||
      { echo "import: $src/$f does not match SHA256SUMS" >&2; exit 1; }
    cp "$src/$f" "$here/$f.new" && mv "$here/$f.new" "$here/$f"
  done
fi
(cd "$here" && sha256sum --quiet -c SHA256SUMS) || { echo "import: bundled archives differ from SHA256SUMS" >&2; exit 1; }
[ "$src" != --check ] || { echo "import: ${files[*]}: SHA-256 as in SHA256SUMS"; exit 0; }
for f in "${files[@]}"; do
  ver=${f#rdma-core-}; ver=${ver%.tar.xz}
  rm -rf "$here/licenses/$ver"; mkdir -p "$here/licenses/$ver"
  # The top-level licence texts and Debian's per-file copyright summary.
  tar -xJf "$here/$f" -C "$here/licenses/$ver" --strip-components=1 --wildcards \
    "rdma-core-$ver/COPYING.*" "rdma-core-$ver/debian/copyright"
  mv "$here/licenses/$ver/debian/copyright" "$here/licenses/$ver/copyright" && rmdir "$here/licenses/$ver/debian"
done
echo "import: ${files[*]} imported, SHA-256 checked, licences in licenses/"
