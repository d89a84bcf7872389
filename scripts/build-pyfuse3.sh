#!/usr/bin/env bash
# Build pyfuse3 from its released source with native/pyfuse3/pass-inode-when-no-open.patch
# applied, and install it with the given pip. The patch lets the daemon serve files in the
# kernel's no-open mode (docs/architecture.md, "Cache modes"); mokkafs detects it at run time
# and falls back to the stock keep-cache mode without it. Why and what: native/pyfuse3/README.md.
#
# It runs from a checkout (scripts/) and from an installation, where pip put it beside the
# patch in share/mokkafs/pyfuse3/ (pyproject.toml, data-files). It needs gcc, pkg-config,
# patch and libfuse3's headers (Debian: libfuse3-dev).
#
#   scripts/build-pyfuse3.sh PIP              build the patched wheel and install it with PIP
#   scripts/build-pyfuse3.sh PIP --stock DIR  install the unpatched release into DIR (a
#                                             --target directory the tests put first on
#                                             PYTHONPATH to prove the fallback)
#
# The source archive is checked against its sha256, so a changed release fails loudly here
# rather than as a patch that no longer means what was reviewed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pip=${1:?usage: build-pyfuse3.sh PIP [--stock DIR]}
shift

# The release the patch targets: pyproject.toml pins mokkafs's pyfuse3 to it (a test keeps
# the two equal), so no resolver can pick another release the patch does not fit.
VERSION=3.5.0
SHA256=88399a9494b88603230bba300f4ba9ad63fece5ed514ca3633d555a0c6a42b24
PATCH="$here/pass-inode-when-no-open.patch"  # installed: beside this script
[ -f "$PATCH" ] || PATCH="$here/../native/pyfuse3/pass-inode-when-no-open.patch"  # a checkout

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$pip" download -q --no-deps --no-binary pyfuse3 -d "$work" "pyfuse3==$VERSION"
archive="$work/pyfuse3-$VERSION.tar.gz"
echo "$SHA256  $archive" | sha256sum --check --quiet -
tar -xzf "$archive" -C "$work"
src="$work/pyfuse3-$VERSION"

if [ "${1:-}" = "--stock" ]; then
  target=${2:?--stock needs a directory}
  rm -rf "$target"
  "$pip" install -q --no-deps --target "$target" "$src"
  exit 0
fi

patch -d "$src" -p1 --forward --quiet < "$PATCH"
"$pip" wheel -q --no-deps -w "$work/wheel" "$src"
"$pip" install -q --no-deps --force-reinstall "$work"/wheel/pyfuse3-*.whl
