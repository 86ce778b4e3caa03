#!/usr/bin/env bash
# End-to-end test of our sandbox-provider plugins in the REAL published Paperclip host.
# Run as root from the repo (after `npm run build`): scripts/e2e-paperclip/run.sh
#
#   1. install (or reuse) paperclipai + Node 24 in a cache outside the repo   (install.sh)
#   2. copy the built plugins + their runtime deps into a world-readable scratch dir (install by path)
#   2b. install by name: npm run release:pack into the scratch dir, a local npm registry (verdaccio on
#      loopback, no uplink: registry.mjs) holding those tarballs, the server user's ~/.npmrc pointing
#      at it; the CLI installed from it with npm install -g and npx
#   3. start the server as user nobody (embedded Postgres refuses root), loopback, telemetry off,
#      with its data in a fresh dir under the scratch dir
#   4. e2e.mjs: for each install mode in turn (by package name, then by local path), install the
#      plugins, probes, config refusals, claude_local task runs (by name also: upgrade over the API)
#   5. ALWAYS: stop the registry and the server (by pid, then its remaining process tree by pid),
#      remove the scratch dir
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
#      E2E_INSTALL          install modes, in order (default name,path): name = POST /api/plugins/install
#                           {"packageName"} from the local registry; path = {"packageName": <dir>, "isLocalPath": true}
#      E2E_CLI              1 (default, with name): the CLI from the local registry (npm install -g, npx); 0: skip
#      E2E_EMULATOR_LATENCY_MS  delay each hosted provider's emulator adds before every vendor call (default 0)
#      E2E_TIMING_RUNS      timed runs per provider, instead of its own count
#      E2E_ACP_POLL         1: the ACP task again on a copy of the plugin without incrementalSessionOutput (the
#                           host's output-file poll; install by path; HOST-CALLS.md §9); off by default
#      E2E_COMMAND_CHANNEL  off|always: the kit's command-channel switch in the copied plugins' workers (set by
#                           the call recorder's wrapper, so installs by path only: E2E_INSTALL=path); a measurement
#                           of the channel against a fresh exec per command (bench/README.md), not an operator knob
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
T_START=$(date +%s%N)
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
log() { local ms; ms=$(ms_since "$T_START"); printf '[e2e %4d.%ds] %s\n' $((ms / 1000)) $(((ms % 1000) / 100)) "$*"; }

[ "$(id -u)" = 0 ] || { echo "run.sh needs root (it starts the server as user nobody with setpriv)" >&2; exit 2; }
# What the run needs from the system, installed here so a fresh Debian/Ubuntu machine needs no other
# step: bwrap for the sandboxes, chromium for the browser test of the host's form (E2E_UI=1).
apt_need=()
command -v bwrap >/dev/null || apt_need+=(bubblewrap)
command -v curl >/dev/null || apt_need+=(curl ca-certificates)
command -v setpriv >/dev/null || apt_need+=(util-linux)
# exe-dev's emulator runs a real OpenSSH server per VM and the provider the ssh client.
[ -x /usr/sbin/sshd ] || apt_need+=(openssh-server)
command -v ssh >/dev/null || apt_need+=(openssh-client)
if [ "${E2E_UI:-1}" != 0 ] && [ -z "${E2E_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then apt_need+=(chromium); fi
if [ ${#apt_need[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || { echo "missing system packages: ${apt_need[*]} (install them; apt-get not found)" >&2; exit 2; }
  echo "[e2e] installing system packages: ${apt_need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_need[@]}"
fi
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

INSTALL_MODES=${E2E_INSTALL:-name,path}
BY_NAME=0; BY_PATH=0
for m in ${INSTALL_MODES//,/ }; do
  case "$m" in name) BY_NAME=1 ;; path) BY_PATH=1 ;; *) echo "E2E_INSTALL: unknown mode '$m' (name, path)" >&2; exit 2 ;; esac
done

# ---------------------------------------------------------------- scratch dir + cleanup trap
RUN_DIR=$(mktemp -d "${E2E_SCRATCH:-/var/tmp}/pc-e2e-XXXXXX")
chmod 755 "$RUN_DIR"
SERVER_PID=""
REGISTRY_PID=""
FAKE_DEST=/usr/local/bin/paperclip-e2e-claude
FAKE_INSTALLED=0
# The fake ACP agent (an agent with engine "acp" names it as its agentCommand), beside the fake CLI.
FAKE_ACP_DEST=/usr/local/bin/paperclip-e2e-acp
FAKE_ACP_INSTALLED=0
# The host's login flows run the fixed commands `claude setup-token` / `codex login --device-auth`
# in a fresh sandbox: the fake login CLIs are installed under those names for the run, unless
# something of that name is already there (then the login scenario is skipped, see e2e.mjs).
FAKE_LOGIN_NAMES="claude codex"
FAKE_LOGIN_INSTALLED=""
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
stop_registry() {
  [ -n "$REGISTRY_PID" ] || return 0
  kill -TERM "$REGISTRY_PID" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$REGISTRY_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$REGISTRY_PID" 2>/dev/null
  REGISTRY_PID=""
}
cleanup() {
  local rc=$?
  set +e
  stop_registry
  stop_server
  [ "$FAKE_INSTALLED" = 1 ] && rm -f "$FAKE_DEST"
  [ "$FAKE_ACP_INSTALLED" = 1 ] && rm -f "$FAKE_ACP_DEST"
  for n in $FAKE_LOGIN_INSTALLED; do cmp -s "$HERE/fake-login.sh" "/usr/local/bin/$n" && rm -f "/usr/local/bin/$n"; done
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
PLUGINS=""
if [ "$BY_PATH" = 1 ]; then
  # shellcheck disable=SC2086
  PLUGINS=$(E2E_RECORD_DIR="$RECORD_DIR" E2E_COMMAND_CHANNEL="${E2E_COMMAND_CHANNEL:-}" "$NODE24" "$HERE/prepare-copy.mjs" "$SRC" "$RUN_DIR/copy" $PLUGIN_DIRS)
  chmod -R o+rX,o-w "$RUN_DIR/copy"
fi
# The fake Claude CLI must exist inside every sandbox BEFORE any sync (the host runs `command -v` first):
# jails bind the host's /usr read-only, so it goes to /usr/local/bin for the duration of the run.
if [ -e "$FAKE_DEST" ] && ! cmp -s "$HERE/fake-claude.sh" "$FAKE_DEST"; then
  echo "$FAKE_DEST exists and is not ours; refusing to overwrite" >&2; exit 1
fi
install -m 0755 "$HERE/fake-claude.sh" "$FAKE_DEST"; FAKE_INSTALLED=1
if [ -e "$FAKE_ACP_DEST" ] && ! cmp -s "$HERE/fake-acp-agent.mjs" "$FAKE_ACP_DEST"; then
  echo "$FAKE_ACP_DEST exists and is not ours; refusing to overwrite" >&2; exit 1
fi
install -m 0755 "$HERE/fake-acp-agent.mjs" "$FAKE_ACP_DEST"; FAKE_ACP_INSTALLED=1
FAKE_LOGIN_READY=1
for n in $FAKE_LOGIN_NAMES; do
  if [ -e "/usr/local/bin/$n" ] && ! cmp -s "$HERE/fake-login.sh" "/usr/local/bin/$n"; then
    log "/usr/local/bin/$n exists and is not ours: the login scenarios are skipped"; FAKE_LOGIN_READY=0
  elif [ "$(command -v "$n" 2>/dev/null || echo "/usr/local/bin/$n")" != "/usr/local/bin/$n" ]; then
    log "a real $n is on PATH ($(command -v "$n")): the login scenarios are skipped"; FAKE_LOGIN_READY=0
  fi
done
if [ "$FAKE_LOGIN_READY" = 1 ]; then
  for n in $FAKE_LOGIN_NAMES; do install -m 0755 "$HERE/fake-login.sh" "/usr/local/bin/$n"; FAKE_LOGIN_INSTALLED="$FAKE_LOGIN_INSTALLED $n"; done
fi
[ "$BY_PATH" = 1 ] && log "prepared plugin copy in $(ms_since "$t") ms ($(du -sh "$RUN_DIR/copy" | cut -f1)): $(echo "$PLUGINS" | cut -f1 | tr '\n' ' ')"

# ---------------------------------------------------------------- 2b. install by name: release tarballs in a local registry
REGISTRY_URL=""
if [ "$BY_NAME" = 1 ]; then
  command -v node >/dev/null || { echo "missing tool: node (verdaccio runs on the system Node)" >&2; exit 2; }
  [ -f "$REPO/packages/release/dist/cli.js" ] || { echo "packages/release is not built: run 'npm run build' first" >&2; exit 1; }
  t=$(date +%s%N)
  node "$REPO/packages/release/dist/cli.js" pack --out "$RUN_DIR/release" > "$RUN_DIR/release-pack.log"
  log "release:pack in $(ms_since "$t") ms: $(tail -n 1 "$RUN_DIR/release-pack.log")"
  t=$(date +%s%N)
  VERDACCIO=$(node "$HERE/registry.mjs" install | sed -n 's/^VERDACCIO=//p')
  eval "$(node "$HERE/registry.mjs" prepare "$RUN_DIR/release" "$RUN_DIR/registry" | grep -E '^REGISTRY_(PORT|URL|CONFIG)=')"
  chown -R "$SERVER_UID:$SERVER_GID" "$RUN_DIR/registry"
  log "registry prepared in $(ms_since "$t") ms (verdaccio, third-party seed, upgrade tarballs)"
  t=$(date +%s%N)
  # As the server's user, from nothing but its config: no uplink, loopback only.
  setsid setpriv --reuid="$SERVER_UID" --regid="$SERVER_GID" --clear-groups \
    env -i HOME="$RUN_DIR/registry" LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
    node "$VERDACCIO" --config "$REGISTRY_CONFIG" < /dev/null > "$RUN_DIR/registry/verdaccio.out" 2>&1 &
  REGISTRY_PID=$!
  up=0
  for _ in $(seq 1 300); do
    kill -0 "$REGISTRY_PID" 2>/dev/null || break
    if curl -sf -m 2 "${REGISTRY_URL}-/ping" >/dev/null 2>&1; then up=1; break; fi
    sleep 0.2
  done
  [ "$up" = 1 ] || { echo "verdaccio did not start:" >&2; tail -n 30 "$RUN_DIR/registry/verdaccio.out" >&2; exit 1; }
  node "$HERE/registry.mjs" publish "$REGISTRY_URL" "$RUN_DIR/release" "$RUN_DIR/registry"
  log "local registry at $REGISTRY_URL (pid $REGISTRY_PID) up and published in $(ms_since "$t") ms"
  # The server user's own npm config: the host's plugin loader runs `npm install <name> --prefix
  # ~/.paperclip/plugins --save --ignore-scripts` with the server's environment.
  printf 'registry=%s\nupdate-notifier=false\nfund=false\naudit=false\n' "$REGISTRY_URL" > "$RUN_DIR/home/.npmrc"
  chown "$SERVER_UID:$SERVER_GID" "$RUN_DIR/home/.npmrc"
  if [ "${E2E_CLI:-1}" = 1 ]; then
    t=$(date +%s%N)
    node "$HERE/registry.mjs" cli "$REGISTRY_URL" "$RUN_DIR/cli"
    log "CLI installed by name and run in $(ms_since "$t") ms"
  fi
fi

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
E2E_INSTALL="$INSTALL_MODES" E2E_REGISTRY_URL="$REGISTRY_URL" E2E_RELEASE_DIR="$RUN_DIR/release" E2E_REPO="$REPO" \
E2E_OUT_DIR="$OUT_DIR" E2E_API="http://127.0.0.1:$PORT/api" E2E_RUN_DIR="$RUN_DIR" E2E_PLUGINS="$PLUGINS" E2E_FAKE_COMMAND="$FAKE_DEST" E2E_FAKE_ACP_COMMAND="$(basename "$FAKE_ACP_DEST")" \
E2E_FAKE_LOGIN="$FAKE_LOGIN_READY" \
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
