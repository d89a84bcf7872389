#!/usr/bin/env bash
# Make the image's Debian 12 base from the Debian archive, with no image registry:
# debootstrap (minbase) into a temporary directory, then `podman import`.
# Usage: deploy/make-base-image.sh [TAG]   (default localhost/mokkafs-debian:bookworm)
set -euo pipefail
tag=${1:-localhost/mokkafs-debian:bookworm}
if podman image exists "$tag"; then
  echo "make-base-image: $tag exists" >&2
  exit 0
fi
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
root=$(mktemp -d /var/tmp/mokkafs-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >&2
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | podman import --change 'CMD ["/bin/bash"]' - "$tag" >&2
echo "make-base-image: built $tag" >&2
