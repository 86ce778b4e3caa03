#!/usr/bin/env bash
# Install (or reuse) paperclipai@$PAPERCLIP_VERSION and Node 24 into a cache folder outside the repo.
# Usage: install.sh            -> prints nothing on stdout except "ROOT=<dir>" at the end
# Env:   PAPERCLIP_E2E_CACHE (default /var/cache/paperclip-sandbox-e2e)
#        PAPERCLIP_VERSION   (default 2026.916.1), NODE_MAJOR (default 24)
set -euo pipefail
CACHE=${PAPERCLIP_E2E_CACHE:-/var/cache/paperclip-sandbox-e2e}
PV=${PAPERCLIP_VERSION:-2026.916.1}
NM=${NODE_MAJOR:-24}
ROOT="$CACHE/paperclipai-$PV-node$NM"
if [ -f "$ROOT/.complete" ]; then
  echo "[install] cache hit: $ROOT (0 s)" >&2
  echo "ROOT=$ROOT"; exit 0
fi
t0=$(date +%s)
mkdir -p "$CACHE"
TMP=$(mktemp -d "$CACHE/.tmp-install-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# 1) Node $NM from the npm package node@$NM (binary in node_modules/node/bin/node)
mkdir -p "$TMP/node" "$TMP/inst"
( cd "$TMP/node" && echo '{"name":"pc-e2e-node","private":true}' > package.json \
  && npm install --no-audit --no-fund --loglevel=error "node@$NM" >&2 )
N24="$TMP/node/node_modules/node/bin/node"
"$N24" -v >&2
# 2) paperclipai with Node $NM first on PATH (its npm postinstalls run with Node $NM)
( cd "$TMP/inst" && echo '{"name":"pc-e2e-host","private":true}' > package.json \
  && PATH="$(dirname "$N24"):$PATH" npm install --no-audit --no-fund --loglevel=error "paperclipai@$PV" >&2 )
# world-readable so user nobody can run it
chmod -R o+rX "$TMP"
chmod o+rx "$CACHE"
touch "$TMP/.complete"
rm -rf "$ROOT"; mv "$TMP" "$ROOT"; trap - EXIT
echo "[install] installed paperclipai@$PV + node@$NM into $ROOT in $(( $(date +%s) - t0 )) s" >&2
echo "ROOT=$ROOT"
