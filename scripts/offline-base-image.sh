#!/usr/bin/env bash
# Make a Debian base image with Python 3 for `openenv-lab docker build --base-image`, on a machine whose
# Docker engine cannot reach an image registry: debootstrap (Debian's own package mirror) + `docker import`.
#
#   sudo scripts/offline-base-image.sh [TAG]        # default tag: openenv-lab/base:bookworm
#
# Needs root, debootstrap and a running Docker engine. Takes 1-2 minutes; the image is about 300 MB.
set -euo pipefail
tag="${1:-openenv-lab/base:bookworm}"
suite="${SUITE:-bookworm}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag already exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "$suite" "$rootfs" >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  - "$tag" >/dev/null
echo "built $tag ($(docker run --rm "$tag" python3 --version))"
