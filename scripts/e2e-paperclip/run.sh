#!/usr/bin/env bash
# End-to-end test of our sandbox-provider plugins in the REAL published Paperclip host.
# Run as root from the repo (after `npm run build`): scripts/e2e-paperclip/run.sh
#
#   1. install (or reuse) paperclipai + Node 24 in a cache outside the repo   (install.sh)
#   2. copy the built plugins + their runtime deps into a world-readable scratch dir
#   3. start the server as user nobody (embedded Postgres refuses root), loopback, telemetry off,
#      with its data in a fresh dir under the scratch dir
#   4. e2e.mjs: install plugins by local path, probes, config refusals, claude_local task runs
#   5. ALWAYS: stop the server (by pid, then its remaining process tree by pid), remove the scratch dir
#
# Env: PAPERCLIP_E2E_CACHE  cache root (default /var/cache/paperclip-sandbox-e2e)
#      PAPERCLIP_VERSION    default 2026.916.1
#      E2E_ONLY             comma list of driver keys (default: all in providers.mjs)
#      E2E_RECORD_CALLS     1 (default): record every host->plugin call of the copied plugins; 0: off
#      E2E_KEEP_RUN_DIR     1: keep the scratch dir (server data, logs) for debugging; default removes it
#      E2E_SCRATCH          parent of the scratch dir (default /var/tmp)
#      E2E_HOLD_FILE        debugging: after the scenarios keep the server up until this file is removed
#      E2E_OUT_DIR          kept output (browser screenshots in ui/), default <repo>/.e2e-out; ui/ is emptied first
#      E2E_UI               1 (default): browser test of the host's environment form (needs Debian chromium); 0: skip
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
T_START=$(date +%s%N)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
log() { local ms; ms=$(ms_since "$T_START"); printf '[e2e %4d.%ds] %s\n' $((ms / 1000)) $(((ms % 1000) / 100)) "$*"; }

[ "$(id -u)" = 0 ] || { echo "run.sh needs root (it starts the server as user nobody with setpriv)" >&2; exit 2; }
for tool in setpriv setsid curl bwrap; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 2; }
done
SERVER_UID=65534; SERVER_GID=65534   # nobody:nogroup
PORT=3100; PG_PORT=54329             # the onboarded defaults
# One run at a time on a machine: the ports, the fake agent's path and the cache are shared.
exec 9>"${PAPERCLIP_E2E_LOCK:-/var/lock/paperclip-sandbox-e2e.lock}"
if ! flock -n 9; then log "another e2e run holds the lock; waiting"; flock 9; fi

# ---------------------------------------------------------------- 1. install
t=$(date +%s%N)
ROOT=$("$HERE/install.sh" | sed -n 's/^ROOT=//p')
NODE24="$ROOT/node/node_modules/node/bin/node"
log "install step took $(ms_since "$t") ms (paperclipai + node24 in $ROOT)"
[ -x "$NODE24" ] || { echo "node 24 missing in $ROOT" >&2; exit 1; }

# ---------------------------------------------------------------- scratch dir + cleanup trap
RUN_DIR=$(mktemp -d "${E2E_SCRATCH:-/var/tmp}/pc-e2e-XXXXXX")
chmod 755 "$RUN_DIR"
SERVER_PID=""
FAKE_DEST=/usr/local/bin/paperclip-e2e-claude
FAKE_INSTALLED=0
descendants() { # pid -> all descendant pids (depth first)
  local kids
  kids=$(ps -o pid= --ppid "$1" 2>/dev/null || true)
  for k in $kids; do echo "$k"; descendants "$k"; done
}
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  local tree; tree="$SERVER_PID $(descendants "$SERVER_PID" | tr '\n' ' ')"
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.2; done
  fi
  # Whatever of the tree (Postgres, plugin workers, sandboxes they started) outlived the server: by pid.
  local left=""
  for pid in $tree; do
    # a zombie (exited, not yet reaped by init) is not a leftover
    kill -0 "$pid" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] && left="$left $pid"
  done
  if [ -n "$left" ]; then
    log "killing leftover server processes:$left"
    kill -KILL $left 2>/dev/null || true
  fi
  # Processes the server's sandboxes detached from its tree, owned by nobody and tied to this run dir
  # (argv, env or cwd); matched by pid, never by name.
  local stray=""
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [ "$(stat -c %u "$d" 2>/dev/null)" = "$SERVER_UID" ] || continue
    if grep -qsF "$RUN_DIR" "$d/cmdline" "$d/environ" || [[ "$(readlink "$d/cwd" 2>/dev/null)" == "$RUN_DIR"* ]]; then
      stray="$stray $pid"
    fi
  done
  if [ -n "$stray" ]; then
    log "killing stray sandbox processes of this run:$stray"
    kill -KILL $stray 2>/dev/null || true
  fi
  SERVER_PID=""
}
cleanup() {
  local rc=$?
  set +e
  stop_server
  [ "$FAKE_INSTALLED" = 1 ] && rm -f "$FAKE_DEST"
  # the fake-plugin provider keeps lease dirs under the worker's /tmp; remove only what our server user left there
  if [ -d /tmp/paperclip-fake-plugin ]; then
    find /tmp/paperclip-fake-plugin -mindepth 1 -maxdepth 1 -user "$SERVER_UID" -newer "$RUN_DIR" -exec rm -rf -- {} + 2>/dev/null
  fi
  if [ "${E2E_KEEP_RUN_DIR:-0}" = 1 ]; then log "kept $RUN_DIR"; else rm -rf -- "$RUN_DIR"; fi
  log "finished (exit $rc) in $(ms_since "$T_START") ms"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 2. world-readable copy of the plugins
t=$(date +%s%N)
mkdir -p "$RUN_DIR"/{data,home,calls}
chown "$SERVER_UID:$SERVER_GID" "$RUN_DIR"/{data,home,calls}
PLUGIN_DIRS=$("$NODE24" -e '
  import(process.argv[1]).then(({ PROVIDERS }) => {
    const only = (process.env.E2E_ONLY ?? "").split(",").filter(Boolean);
    const dirs = [...new Set(PROVIDERS.filter((p) => !only.length || only.includes(p.driverKey)).map((p) => p.dir))];
    console.log(dirs.join(" "));
  });' "${E2E_PROVIDERS_MODULE:-$HERE/providers.mjs}")
SRC=${E2E_COPY_FROM:-$REPO}   # a different source tree (e.g. a throwaway plugin) for debugging the script itself
for d in $PLUGIN_DIRS; do
  [ -d "$SRC/$d/dist" ] || { echo "$d is not built: run 'npm run build' first" >&2; exit 1; }
done
RECORD_DIR=""
[ "${E2E_RECORD_CALLS:-1}" = 1 ] && RECORD_DIR="$RUN_DIR/calls"
# shellcheck disable=SC2086
PLUGINS=$(E2E_RECORD_DIR="$RECORD_DIR" "$NODE24" "$HERE/prepare-copy.mjs" "$SRC" "$RUN_DIR/copy" $PLUGIN_DIRS)
chmod -R o+rX,o-w "$RUN_DIR/copy"
# The fake Claude CLI must exist inside every sandbox BEFORE any sync (the host runs `command -v` first):
# jails bind the host's /usr read-only, so it goes to /usr/local/bin for the duration of the run.
if [ -e "$FAKE_DEST" ] && ! cmp -s "$HERE/fake-claude.sh" "$FAKE_DEST"; then
  echo "$FAKE_DEST exists and is not ours; refusing to overwrite" >&2; exit 1
fi
install -m 0755 "$HERE/fake-claude.sh" "$FAKE_DEST"; FAKE_INSTALLED=1
log "prepared plugin copy in $(ms_since "$t") ms ($(du -sh "$RUN_DIR/copy" | cut -f1)): $(echo "$PLUGINS" | cut -f1 | tr '\n' ' ')"

# ---------------------------------------------------------------- 3. start the server as nobody
for p in $PORT $PG_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "port $p is busy: another Paperclip server running?" >&2; exit 1; fi
done
t=$(date +%s%N)
cd "$RUN_DIR/home"
setsid setpriv --reuid="$SERVER_UID" --regid="$SERVER_GID" --clear-groups \
  env -i HOME="$RUN_DIR/home" USER=nobody LANG=C.UTF-8 TZ=UTC PAPERCLIP_TELEMETRY_DISABLED=1 \
  PATH="$(dirname "$NODE24"):$ROOT/inst/node_modules/.bin:/usr/local/bin:/usr/bin:/bin" \
  paperclipai onboard -y --data-dir "$RUN_DIR/data" --bind loopback --no-install-service \
  < /dev/null > "$RUN_DIR/server.log" 2>&1 &
SERVER_PID=$!
cd "$REPO"
healthy=0
for _ in $(seq 1 600); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  if curl -sf -m 2 "http://127.0.0.1:$PORT/api/health" 2>/dev/null | grep -q '"status":"ok"'; then healthy=1; break; fi
  sleep 0.2
done
if [ "$healthy" != 1 ]; then
  echo "server did not become healthy; log tail:" >&2
  tail -n 60 "$RUN_DIR/server.log" | sed 's/\x1b\[[0-9;]*m//g' >&2
  exit 1
fi
log "server healthy in $(ms_since "$t") ms (pid $SERVER_PID, as nobody, data $RUN_DIR/data)"

# ---------------------------------------------------------------- 4. the scenarios
OUT_DIR=${E2E_OUT_DIR:-$REPO/.e2e-out}
rm -rf -- "$OUT_DIR/ui"; mkdir -p "$OUT_DIR"
set +e
E2E_OUT_DIR="$OUT_DIR" E2E_API="http://127.0.0.1:$PORT/api" E2E_RUN_DIR="$RUN_DIR" E2E_PLUGINS="$PLUGINS" E2E_FAKE_COMMAND="$FAKE_DEST" \
  E2E_SERVER_PID="$SERVER_PID" E2E_SERVER_LOG="$RUN_DIR/server.log" E2E_CALLS_DIR="$RECORD_DIR" \
  "$NODE24" "$HERE/e2e.mjs"
rc=$?
set -e
# Debugging aid: keep the server up (API at http://127.0.0.1:$PORT/api) until this file is removed.
if [ -n "${E2E_HOLD_FILE:-}" ]; then
  touch "$E2E_HOLD_FILE"; log "holding the server until $E2E_HOLD_FILE is removed"
  while [ -e "$E2E_HOLD_FILE" ] && kill -0 "$SERVER_PID" 2>/dev/null; do sleep 1; done
fi
exit "$rc"
