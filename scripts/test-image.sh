#!/usr/bin/env bash
# Builds the tiny workspace image the tests use, without any registry: a rootfs of Debian's
# busybox-static (every applet linked), imported with `docker import`. Idempotent: rebuilt only
# when missing or when this script changes (the script's hash is the image label).
set -euo pipefail
IMAGE="${RUNCELL_TEST_IMAGE:-runcell-test/busybox:latest}"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/lib/busybox-rootfs.sh"
HASH="$(cat "$0" "$HERE/lib/busybox-rootfs.sh" | sha256sum | cut -c1-16)"
if [ "$(docker image inspect -f '{{index .Config.Labels "runcell.test-image"}}' "$IMAGE" 2>/dev/null || true)" = "$HASH" ]; then
  echo "test image $IMAGE is up to date"
  exit 0
fi
ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT
busybox_rootfs "$ROOT"
echo "building $IMAGE from busybox ($(du -sh "$ROOT" | cut -f1))"
tar -C "$ROOT" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL runcell.test-image=$HASH" \
  - "$IMAGE" >/dev/null
echo "built $IMAGE"
