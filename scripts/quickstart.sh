#!/usr/bin/env bash
# Quick start on a fresh Debian/Ubuntu machine: installs bubblewrap and the npm dependencies, builds,
# then runs examples/hello in a bubblewrap sandbox through the paperclip-sandbox CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends bubblewrap
fi
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run build --silent
exec node packages/cli/dist/main.js run --provider bubblewrap --workspace examples/hello --timings -- sh ./hello.sh "$@"
