#!/usr/bin/env bash
# The tests of what runs inside the Paperclip host, on the host's Node (>= 24.11, the npm package
# `node@24` the e2e installs): every plugin worker the conformance suite forks, the kit, the sandbox
# backend and the emulators then run on Node 24, so a difference from the machine's Node 20 shows
# here and not in a user's host. The CLI and the release tooling run on the user's own Node (>= 20)
# and load a native module built for the installing Node, so they stay on the Node 20 pass; a provider
# test that spawns the CLI skips itself here with the reason (conformance's `cliSkipReason`).
# Usage: scripts/test-node24.sh [vitest filters...]   (after npm ci; builds first like every run)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(scripts/e2e-paperclip/install.sh | sed -n 's/^ROOT=//p')
NODE24="$ROOT/node/node_modules/node/bin/node"
"$NODE24" -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<24||(a===24&&b<11)) { console.error(`node ${process.version} is older than the host needs (24.11)`); process.exit(1) }'
echo "[node24] $("$NODE24" -v) from $NODE24"
if [ $# -eq 0 ]; then set -- packages/kit packages/worker-client packages/conformance packages/sandbox-backend packages/emulator-kit emulators providers; fi
PATH="$(dirname "$NODE24"):$PATH" exec "$NODE24" node_modules/vitest/vitest.mjs run "$@"
