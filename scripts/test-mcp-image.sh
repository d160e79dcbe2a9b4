#!/usr/bin/env bash
# Builds the workspace image the MCP and git tests use, without any registry: the busybox rootfs of
# test-image.sh plus the host's git (for the agent's commits) and the host's Node.js (binary and every shared library ldd lists, loader
# included, at their host paths) and @modelcontextprotocol/server-everything with its runtime
# dependencies under /opt/mcp-everything, run by /usr/local/bin/mcp-server-everything. Imported
# with `docker import`. Idempotent: rebuilt only when missing or when this script, the host's node
# version or the package version (package.json devDependencies) changes (their hash is the label).
set -euo pipefail
IMAGE="${RUNCELL_TEST_MCP_IMAGE:-runcell-test/mcp:latest}"
PKG="@modelcontextprotocol/server-everything"
DIR="$(cd "$(dirname "$0")/.." && pwd)"
NODE="$(command -v node || true)"
[ -n "$NODE" ] || { echo "node is not installed" >&2; exit 1; }
NODE="$(readlink -f "$NODE")"
NODE_VERSION="$("$NODE" --version)"
PKG_VERSION="$("$NODE" -e 'const p = require(process.argv[1]); process.stdout.write((p.devDependencies || {})[process.argv[2]] || (p.dependencies || {})[process.argv[2]] || "")' "$DIR/package.json" "$PKG")"
[ -n "$PKG_VERSION" ] || { echo "$PKG is not in $DIR/package.json" >&2; exit 1; }
GIT="$(readlink -f "$(command -v git || true)")"
[ -x "$GIT" ] || { echo "git is not installed (apt-get install git)" >&2; exit 1; }
GIT_VERSION="$("$GIT" --version)"
. "$DIR/scripts/lib/busybox-rootfs.sh"
HASH="$( { cat "$0" "$DIR/scripts/lib/busybox-rootfs.sh" | sha256sum; echo "node $NODE_VERSION"; echo "$PKG@$PKG_VERSION"; echo "$GIT_VERSION"; } | sha256sum | cut -c1-16)"
if [ "$(docker image inspect -f '{{index .Config.Labels "runcell.test-image"}}' "$IMAGE" 2>/dev/null || true)" = "$HASH" ]; then
  echo "test image $IMAGE is up to date (node $NODE_VERSION, $PKG@$PKG_VERSION)"
  exit 0
fi
OLD_ID="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
ROOT="$(mktemp -d)"
NPM_DIR="$(mktemp -d)"
trap 'rm -rf "$ROOT" "$NPM_DIR"' EXIT
busybox_rootfs "$ROOT"

# A binary, then every library ldd lists (the `=> /path` ones and the loader's absolute path),
# copied dereferenced to the same paths in the rootfs (/lib64 may be a symlink on the host).
copy_binary() {
  local bin="$1" dest="$2" ldd_out
  ldd_out="$(ldd "$bin" 2>&1 || true)"
  echo "$ldd_out" | grep -q '^[[:space:]]*/' || { echo "no dynamic loader in ldd $bin: $ldd_out" >&2; exit 1; }
  mkdir -p "$ROOT$(dirname "$dest")"
  cp "$bin" "$ROOT$dest"
  for lib in $(echo "$ldd_out" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    mkdir -p "$ROOT$(dirname "$lib")"
    cp -L "$lib" "$ROOT$lib"
  done
}
copy_binary "$NODE" /usr/local/bin/node
# git: its builtins (init, add, commit, log…) live in the one binary; git-core holds the same
# binary for the subcommands it re-executes.
copy_binary "$GIT" /usr/bin/git
mkdir -p "$ROOT/usr/lib/git-core" "$ROOT/usr/share/git-core/templates"
cp "$GIT" "$ROOT/usr/lib/git-core/git"

# The MCP server with its runtime dependencies (npm's registry only).
echo "installing $PKG@$PKG_VERSION with npm"
npm install --prefix "$NPM_DIR" --omit=dev --no-audit --no-fund --loglevel=error "$PKG@$PKG_VERSION" | sed '/^$/d; s/^/  /'
ENTRY="node_modules/$PKG/dist/index.js"
[ -f "$NPM_DIR/$ENTRY" ] || { echo "npm installed no $ENTRY" >&2; exit 1; }
mkdir -p "$ROOT/opt/mcp-everything"
cp -a "$NPM_DIR"/. "$ROOT/opt/mcp-everything/"
chmod -R a+rX "$ROOT/opt/mcp-everything"
# Absolute node path: an exec whose environment has no PATH (busybox sh then falls back to one
# without /usr/local/bin) still finds it.
printf '#!/bin/sh\nexec /usr/local/bin/node /opt/mcp-everything/%s "$@"\n' "$ENTRY" > "$ROOT/usr/local/bin/mcp-server-everything"
chmod 755 "$ROOT/usr/local/bin/mcp-server-everything"

echo "building $IMAGE from busybox, $GIT_VERSION, node $NODE_VERSION ($(du -sh "$ROOT/usr/local/bin/node" | cut -f1)) and $PKG@$PKG_VERSION ($(du -sh "$ROOT/opt/mcp-everything" | cut -f1)): $(du -sh "$ROOT" | cut -f1)"
tar -C "$ROOT" --numeric-owner --owner=0 --group=0 -c . | docker import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' \
  --change 'WORKDIR /workspace' \
  --change 'CMD ["/bin/sh"]' \
  --change "LABEL runcell.test-image=$HASH" \
  - "$IMAGE" >/dev/null
# The previous build (126MB) would stay behind untagged; drop it unless a container still uses it.
[ -z "$OLD_ID" ] || [ "$OLD_ID" = "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ] || docker image rm "$OLD_ID" >/dev/null 2>&1 || true
echo "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{ printf "%.0fMB", $1 / 1000000 }'))"
