#!/usr/bin/env node
// Keystroke -> echo latency of the host's login terminal (supportsLoginPty) on bubblewrap, or on
// daytona / modal against their emulators (`--provider`: the vendor's PTY API through its real SDK).
//   login     through the worker client, as the host drives it: loginPtyInput of one character ->
//             the loginPty.output notification that carries its echo. The program on the terminal is
//             the stand-in `codex` (installed in the lease's $HOME/.local/bin) reading its input:
//               echo   cooked mode, the terminal itself echoes (what a login prompt shows)
//               raw    `stty raw -echo; cat`: the program echoes (one more hop, through the program)
//   baseline  the same terminal (util-linux `script`) on this machine through the kit's local runner:
//             no jail, no supervisor, no JSON-RPC
// One keystroke at a time (the next is sent once the previous echo arrived). Needs the built packages
// (`npx tsc -b providers/bubblewrap`). Target: median keystroke -> echo under 50 ms on bubblewrap.
//
//   node bench/login-pty.mjs [--provider bubblewrap|daytona|modal] [--keys 200] [--warmup 20] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { createLocalScriptRunner, withScriptPty } from "../packages/kit/dist/index.js";
import { summarize } from "./lib/stats.mjs";
import { Screen, typeAndTime } from "./lib/terminal.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    provider: { type: "string", default: "bubblewrap" },
    keys: { type: "string", default: "200" },
    warmup: { type: "string", default: "20" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const keys = Number(args.keys);
const warmup = Number(args.warmup);
if (!(keys >= 100)) throw new Error("--keys must be at least 100");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const FAKE = (mode) => `#!/bin/sh
${mode === "raw" ? "stty raw -echo; printf 'ready\\n'; exec cat" : "printf 'ready\\n'; exec cat >/dev/null"}
`;

const driverKey = args.provider;
if (!["bubblewrap", "daytona", "modal", "cloudflare"].includes(driverKey)) throw new Error("--provider must be bubblewrap, daytona, modal or cloudflare");
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-bench-login-"));
/** The hosted providers run against their emulators (the emulator's jails on this machine). */
let emu;
if (driverKey !== "bubblewrap") {
  const { runEmulator } = await import("../packages/emulator-kit/dist/index.js");
  const { emulator } = await import(`../emulators/${driverKey}/dist/index.js`);
  emu = await runEmulator(emulator, {});
}
const configs = {
  bubblewrap: () => ({ stateDir, timeoutMs: 120_000 }),
  daytona: () => ({ apiKey: emu.credentials.apiKey, apiUrl: emu.url, timeoutMs: 120_000 }),
  modal: () => ({ tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "bench-login", image: "node:22" }),
  cloudflare: () => ({ bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token, timeoutMs: 120_000 }),
};
const pkg = await loadPluginPackage(path.join(repoRoot, `providers/${driverKey}`));
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir() } });
const config = configs[driverKey]();
const base = { driverKey, companyId: "bench", environmentId: "bench", config };
const results = {};
let lease;

/** Requests to the vendor's API (cloudflare: to the bridge, not the stand-in container behind it). */
// Running ones too: a WebSocket's record finishes when it closes.
const vendorRecords = (since = 0) => (emu ? emu.requests.list({ since, includeRunning: true }).filter((r) => !r.path.startsWith("/c/")) : []);
/** The last record's id (the recorder keeps a bounded list: ids, not positions). */
const lastId = () => (emu ? (emu.requests.list({ includeRunning: true }).at(-1)?.id ?? 0) : 0);
const describe = (r) => `${r.protocol === "ws" ? "WS" : r.method} ${r.path}`;

async function viaWorker(mode) {
  const install = `mkdir -p "$HOME/.local/bin" && cat > "$HOME/.local/bin/codex" <<'EOF'\n${FAKE(mode)}EOF\nchmod 0755 "$HOME/.local/bin/codex"`;
  const installed = await client.env.execute({ ...base, lease, command: "sh", args: ["-c", install] });
  if (installed.exitCode !== 0) throw new Error(`install failed: ${installed.stderr}`);
  const screen = new Screen();
  const callsBefore = lastId();
  const opened = process.hrtime.bigint();
  const handle = await client.login.open(
    {
      hostRouteId: `bench-${randomUUID()}`,
      driverKey,
      companyId: "bench",
      environmentId: "bench",
      providerLeaseId: lease.providerLeaseId,
      loginCommandKey: "codex",
      sessionHome: `/tmp/paperclip-adapter-login/${randomUUID()}`,
    },
    { onOutput: (chunk) => screen.push(chunk), onExit: () => undefined },
  );
  await screen.until("ready");
  const openMs = ms(opened);
  // Vendor requests the open made (the emulator's recorder; a WebSocket is one).
  const openRequests = vendorRecords(callsBefore).map(describe);
  const send = (ch) => handle.input(ch);
  await typeAndTime(send, screen, warmup);
  const samples = await typeAndTime(send, screen, keys);
  const beforeClose = lastId();
  await handle.close();
  const closeRequests = vendorRecords(beforeClose).map(describe);
  return { ...summarize(samples), openToReadyMs: openMs, openRequests, closeRequests };
}

async function baseline() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "login-bench-local-"));
  try {
    const runner = withScriptPty(createLocalScriptRunner({ cwd: dir, env: { PATH: "/usr/bin:/bin", HOME: dir } }));
    const screen = new Screen();
    const pty = await runner.pty.open({
      script: "printf 'ready\\n'; exec cat >/dev/null",
      cols: 120,
      rows: 30,
      env: { TERM: "xterm-256color" },
      onData: (bytes) => screen.push(bytes.toString("utf8")),
    });
    await screen.until("ready");
    const send = (ch) => pty.write(Buffer.from(ch));
    await typeAndTime(send, screen, warmup);
    const samples = await typeAndTime(send, screen, keys);
    await pty.close();
    return summarize(samples);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  lease = await client.env.acquireLease({ ...base, runId: "bench-login" });
  results.baselineLocalScriptEcho = await baseline();
  results.loginTerminalEcho = await viaWorker("echo");
  results.loginProgramEchoRaw = await viaWorker("raw");
  results.ratioEchoVsBaseline = results.loginTerminalEcho.median / results.baselineLocalScriptEcho.median;
} finally {
  if (lease) await client.env.destroyLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }).catch(() => undefined);
  await client.shutdown();
  await emu?.close();
  fs.rmSync(stateDir, { recursive: true, force: true });
}

const fmt = (n) => n.toFixed(2);
console.log(`keystroke -> echo, ${keys} keys each (ms)      median     p95     min     max`);
for (const [name, s] of /** @type {[string, { median: number, p95: number, min: number, max: number }][]} */ ([
  ["local script PTY (baseline)", results.baselineLocalScriptEcho],
  ["login terminal, terminal echo", results.loginTerminalEcho],
  ["login terminal, program echo (raw)", results.loginProgramEchoRaw],
])) {
  console.log(`${name.padEnd(40)} ${fmt(s.median).padStart(7)} ${fmt(s.p95).padStart(7)} ${fmt(s.min).padStart(7)} ${fmt(s.max).padStart(7)}`);
}
console.log(`ratio (login terminal echo / baseline): ${results.ratioEchoVsBaseline.toFixed(2)}x; open -> prompt ${fmt(results.loginTerminalEcho.openToReadyMs)} ms`);
if (emu) {
  const { openRequests, closeRequests } = results.loginTerminalEcho;
  console.log(`vendor requests per login (the emulator's recorder): open ${openRequests.length} [${openRequests.join(", ")}], close ${closeRequests.length} [${closeRequests.join(", ")}]`);
}
if (driverKey === "bubblewrap") console.log(`target: median < 50 ms on bubblewrap: ${results.loginTerminalEcho.median < 50 ? "PASS" : "FAIL"}`);
else console.log(`${driverKey} against its emulator on loopback: the vendor's own distance is not included`);
fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `login-pty-${driverKey === "bubblewrap" ? "" : `${driverKey}-`}${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, JSON.stringify({ provider: driverKey, node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), keys, results }, null, 2));
console.log(`report: ${path.relative(repoRoot, file)}`);
