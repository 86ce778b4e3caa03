#!/usr/bin/env node
// Keystroke -> echo latency of the custom-image setup terminal (the kit's SSH gateway) on bubblewrap.
//   gateway   as the host's browser terminal connects: environmentStartInteractiveSetup through the
//             worker client, then ssh2 to the payload's `ssh -p <port> <token>@127.0.0.1` (the user
//             name is the credential), a shell {xterm-256color, 120x30}; one character written to the
//             channel, timed until its echo comes back (the login shell's line editor echoes it)
//   baseline  the same gateway in this process over the kit's local `script` PTY (no jail, no worker,
//             no supervisor): what SSH itself costs
// One keystroke at a time (the next once the previous echo arrived). Needs the built packages
// (`npx tsc -b providers/bubblewrap`).
//
//   node bench/setup-terminal.mjs [--keys 200] [--warmup 20] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import ssh2 from "ssh2";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { createLocalScriptRunner, createSshSetupGateway, withScriptPty } from "../packages/kit/dist/index.js";
import { summarize } from "./lib/stats.mjs";
import { Screen, typeAndTime } from "./lib/terminal.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    keys: { type: "string", default: "200" },
    warmup: { type: "string", default: "20" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const keys = Number(args.keys);
const warmup = Number(args.warmup);
if (!(keys >= 100)) throw new Error("--keys must be at least 100");

/** Connects as the host does, opens a shell, times keystrokes at its prompt, exits it. */
async function measure(command) {
  const [, , port, destination] = command.split(" ");
  const [username, host] = destination.split("@");
  const client = new ssh2.Client();
  const opened = process.hrtime.bigint();
  await new Promise((resolve, reject) => {
    client.once("ready", () => resolve(undefined));
    client.once("error", reject);
    client.connect({ host, port: Number(port), username, hostHash: "sha256", hostVerifier: () => true, readyTimeout: 120_000 });
  });
  try {
    const shell = await new Promise((resolve, reject) =>
      client.shell({ term: "xterm-256color", cols: 120, rows: 30 }, { env: { LANG: "C.UTF-8" } }, (error, stream) => (error ? reject(error) : resolve(stream))),
    );
    const screen = new Screen();
    shell.on("data", (chunk) => screen.push(chunk.toString("utf8")));
    shell.write("PS1=ready-$((1+1))'> '\r");
    await screen.until("ready-2> ");
    const openToPromptMs = Number(process.hrtime.bigint() - opened) / 1e6;
    const send = (ch) => shell.write(ch);
    await typeAndTime(send, screen, warmup);
    const samples = await typeAndTime(send, screen, keys);
    const exited = new Promise((resolve) => shell.once("exit", resolve));
    shell.write("\x15exit 0\r");
    await exited;
    return { ...summarize(samples), openToPromptMs };
  } finally {
    client.end();
  }
}

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-bench-setup-"));
const config = { stateDir, timeoutMs: 120_000 };
const base = { driverKey: "bubblewrap", companyId: "bench", environmentId: "bench", config };
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/bubblewrap"));
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir() } });
const results = {};
let session;

async function baseline() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "setup-bench-local-"));
  const gateway = createSshSetupGateway();
  try {
    const runner = withScriptPty(createLocalScriptRunner({ cwd: dir, env: { PATH: "/usr/bin:/bin", HOME: dir } }));
    const { payload } = await gateway.connection({ providerLeaseId: "local", openPty: (spec) => runner.pty.open(spec) }, { expiresAt: null, minutes: 15 });
    return await measure(payload.command);
  } finally {
    await gateway.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

try {
  results.baselineLocalGateway = await baseline();
  session = /** @type {{ providerLeaseId: string, metadata?: Record<string, unknown>, connectionPayload: { command: string } }} */ (
    await client.call(
      "environmentStartInteractiveSetup",
      {
        ...base,
        issueId: null,
        sessionId: randomUUID(),
        sourceTemplateRef: null,
        sourceTemplateKind: null,
        connectionExpiresInMinutes: 15,
        expiresAt: new Date(Date.now() + 30 * 60_000).toISOString(),
      },
      { timeoutMs: 180_000 },
    )
  );
  results.bubblewrapGateway = await measure(session.connectionPayload.command);
  results.ratioVsBaseline = results.bubblewrapGateway.median / results.baselineLocalGateway.median;
} finally {
  if (session)
    await client
      .call("environmentCancelInteractiveSetup", { ...base, issueId: null, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "cancelled" })
      .catch(() => undefined);
  await client.shutdown();
  fs.rmSync(stateDir, { recursive: true, force: true });
}

const fmt = (n) => n.toFixed(2);
console.log(`keystroke -> echo, ${keys} keys each (ms)          median     p95     min     max`);
for (const [name, s] of /** @type {[string, { median: number, p95: number, min: number, max: number }][]} */ ([
  ["SSH gateway over a local script PTY (baseline)", results.baselineLocalGateway],
  ["SSH gateway over a bubblewrap setup jail", results.bubblewrapGateway],
])) {
  console.log(`${name.padEnd(48)} ${fmt(s.median).padStart(7)} ${fmt(s.p95).padStart(7)} ${fmt(s.min).padStart(7)} ${fmt(s.max).padStart(7)}`);
}
console.log(
  `ratio (bubblewrap / baseline): ${results.ratioVsBaseline.toFixed(2)}x; connect -> first prompt ${fmt(results.bubblewrapGateway.openToPromptMs)} ms (baseline ${fmt(results.baselineLocalGateway.openToPromptMs)} ms)`,
);
fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `setup-terminal-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, JSON.stringify({ provider: "bubblewrap", node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), keys, results }, null, 2));
console.log(`report: ${path.relative(repoRoot, file)}`);
