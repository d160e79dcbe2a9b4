#!/usr/bin/env bash
# Builds the tiny workspace image the tests use, without any registry: a rootfs of Debian's
# busybox-static (every applet linked), imported with `docker import`. Idempotent: rebuilt only
# when missing or when this script changes (the script's hash is the image label).
set -euo pipefail
IMAGE="${RUNCELL_TEST_IMAGE:-runcell-test/busybox:latest}"
HASH="$(sha256sum "$0" | cut -c1-16)"
if [ "$(docker image inspect -f '{{index .Config.Labels "runcell.test-image"}}' "$IMAGE" 2>/dev/null || true)" = "$HASH" ]; then
  echo "test image $IMAGE is up to date"
  exit 0
fi
BUSYBOX="$(command -v busybox || true)"
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" 2>/dev/null | grep -q "statically linked" || BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || { echo "busybox-static is not installed (apt-get install busybox-static)" >&2; exit 1; }
ROOT="$(mktemp -d)"
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,tmp,workspace,etc,root,proc,sys,dev}
chmod 1777 "$ROOT/tmp"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$ROOT/bin/busybox" --list); do
  [ "$applet" = "busybox" ] || ln -sf /bin/busybox "$ROOT/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$ROOT/etc/group"
echo "building $IMAGE from busybox ($(du -sh "$ROOT" | cut -f1))"
tar -C "$ROOT" -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL runcell.test-image=$HASH" \
  - "$IMAGE" >/dev/null
echo "built $IMAGE"
