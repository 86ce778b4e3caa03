#!/usr/bin/env node
// The coder provider against the Coder emulator, through the worker client (forked as the host forks
// it). Per case: time per operation (median, p95) and vendor calls per operation (the emulator's
// recorder: REST calls, app-proxy requests and WebSockets, PTY sessions):
//   raw        one `true` through the runner's stream route, straight over the app proxy: the baseline
//   execute    a `true` execute, app-proxy (stream route) and rpty (PTY + stdio mux)
//   stdin      an execute with 100 KiB of stdin
//   sync-in    one sync operation: a 100-file tree (1 MiB) into the workspace; sync-out: back
//   acquire    a cold acquisition (create, build, readiness, runner health, claim, workspace dir)
//   release    release of a lease (delete build, waited for)
// Needs the built packages (`npm run build`).
//
//   node bench/coder.mjs [--runs 30] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import WebSocket from "ws";
import { measureRepeated } from "./lib/recorded.mjs";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/coder/dist/index.js";
import { runnerEmulatorTemplate } from "../providers/coder/dist/runner-install.js";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({ options: { runs: { type: "string", default: "30" }, out: { type: "string", default: path.join(repoRoot, "bench/results") } } });
const runs = Number(args.runs);
if (!(runs >= 10)) throw new Error("--runs must be at least 10");

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "coder-bench-"));
const tree = path.join(scratch, "tree");
fs.mkdirSync(tree);
for (let i = 0; i < 100; i += 1) fs.writeFileSync(path.join(tree, `f${i}.bin`), Buffer.alloc(10 * 1024, i));

const emu = await runEmulator(emulator, { options: { templates: [runnerEmulatorTemplate()] } });
const token = emu.credentials.sessionToken;
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/coder"));
const client = await startWorker(pkg, { env: {} });
const config = { coderUrl: emu.url, apiToken: token, template: "paperclip", timeoutMs: 120_000 };
const rpty = { ...config, commandTransport: "rpty" };
const base = (cfg) => ({ driverKey: "coder", companyId: "bench", environmentId: "bench", config: cfg });
let leaseCount = 0;
const acquire = (cfg) => client.env.acquireLease({ ...base(cfg), runId: `bench-${leaseCount++}`, agentId: "bench", adapterType: "claude_local" });
const release = (cfg, lease) => client.env.releaseLease({ ...base(cfg), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
const exec = (lease, cfg, command, extra = {}) => client.env.execute({ ...base(cfg), lease, command: "sh", args: ["-c", command], cwd: lease.metadata.remoteCwd, ...extra });

const results = {};
try {
  const lease = await acquire(config);
  const ptyLease = await acquire(rpty);
  const app = `${emu.url.replace("http", "ws")}/@paperclip/${lease.metadata.coderWorkspaceName}.main/apps/paperclip-runner/stream`;
  const start = Buffer.concat([Buffer.of(0x01), Buffer.from(JSON.stringify({ script: "true", env: { PATH: "/usr/bin:/bin" }, envMode: "replace" }))]);
  results.raw = await measureRepeated(
    emu,
    runs,
    () =>
      new Promise((resolve, reject) => {
        const socket = new WebSocket(app, { headers: { cookie: `coder_session_token=${token}` } });
        socket.on("open", () => socket.send(start));
        socket.on("close", resolve);
        socket.on("error", reject);
      }),
  );
  results["execute app-proxy"] = await measureRepeated(emu, runs, () => exec(lease, config, "true"));
  results["execute rpty"] = await measureRepeated(emu, runs, () => exec(ptyLease, rpty, "true"));
  const stdin = "x".repeat(100 * 1024);
  results["stdin 100 KiB app-proxy"] = await measureRepeated(emu, Math.ceil(runs / 3), () => exec(lease, config, "cat >/dev/null", { stdin }));
  results["stdin 100 KiB rpty"] = await measureRepeated(emu, Math.ceil(runs / 3), () => exec(ptyLease, rpty, "cat >/dev/null", { stdin }));
  for (const { name, cfg, held } of [
    { name: "app-proxy", cfg: config, held: lease },
    { name: "rpty", cfg: rpty, held: ptyLease },
  ]) {
    const target = `${held.metadata.remoteCwd}/tree`;
    results[`sync-in ${name}`] = await measureRepeated(emu, Math.ceil(runs / 3), (i) =>
      client.env.syncIn({ ...base(cfg), lease: held, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: tree, targetPath: target, kind: "directory" }] }] }),
    );
    results[`sync-out ${name}`] = await measureRepeated(emu, Math.ceil(runs / 3), (i) => {
      const out = path.join(scratch, `out-${name}-${i}`);
      return client.env.syncOut({ ...base(cfg), lease: held, operations: [{ operationId: `out-${i}`, files: [{ sourcePath: target, targetPath: out, kind: "directory" }] }] });
    });
  }
  await release(config, lease);
  await release(rpty, ptyLease);
  const made = [];
  results.acquire = await measureRepeated(emu, Math.ceil(runs / 3), async () => made.push(await acquire(config)));
  results.release = await measureRepeated(emu, made.length, (i) => release(config, made[i]));
} finally {
  await client.shutdown().catch(() => client.kill("SIGKILL"));
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}

const rows = Object.entries(results).map(([name, r]) => `${name.padEnd(26)} ${r.median.toFixed(1).padStart(8)} ${r.p95.toFixed(1).padStart(8)} ${r.callsPerOp.toFixed(1).padStart(7)}`);
console.log(`${"case".padEnd(26)} ${"median".padStart(8)} ${"p95".padStart(8)} ${"calls".padStart(7)}   (ms; vendor calls per operation)`);
console.log(rows.join("\n"));
console.log(`ratio execute app-proxy / raw: ${(results["execute app-proxy"].median / results.raw.median).toFixed(2)}x`);
fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `coder-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify({ node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs, results }, null, 2)}\n`);
console.log(`report: ${file}`);
