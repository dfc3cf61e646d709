#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Re-imports doctest's single header from Debian's doctest-dev package.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:-2.5.3-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/../../ci/lib/debfetch.sh" sid "$work/debs" "doctest-dev=$version" >/dev/null
dpkg-deb -x "$work"/debs/doctest-dev_*.deb "$work/root"
mkdir -p "$here/doctest"
cp "$work/root/usr/include/doctest/doctest.h" "$here/doctest/doctest.h"
cp "$work/root/usr/share/doc/doctest-dev/copyright" "$here/LICENSE.copyright"
echo "$version" >"$here/VERSION"
