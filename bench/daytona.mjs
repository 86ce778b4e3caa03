#!/usr/bin/env node
// The daytona provider against the Daytona emulator, through the worker client (forked as the host
// forks it), with 0 ms and with 40 ms injected latency on every vendor request. Per case: time per
// operation (median, p95) and vendor calls per operation (the emulator's recorder):
//   sdk        one raw SDK `process.executeCommand("true")`: the baseline (one vendor round trip)
//   execute    a plain `true` execute (process/execute through the file-stdio runner)
//   stdin      an execute with 100 KiB of stdin (uploaded, then executed)
//   live       a `true` execute with liveOutput (session + log stream)
//   sync-in    one sync operation: a 100-file tree (1 MiB) into the sandbox
//   sync-out   one sync operation: that tree back to the host
//   task       a real-host-like task run (HOST-CALLS.md §1): acquire, realize, 13 preflight executes
//              (8 with stdin), 4 tar syncIns with post-upload extraction, bridge start, 25 polls,
//              a syncOut, clean-up, release; with liveOutput off and on
// Needs the built packages (`npm run build`).
//
//   node bench/daytona.mjs [--runs 100] [--task-runs 5] [--out bench/results]
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/daytona/dist/index.js";
import { measureRepeated } from "./lib/recorded.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    "task-runs": { type: "string", default: "5" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const taskRuns = Number(args["task-runs"]);
if (!(runs >= 20) || !(taskRuns >= 1)) throw new Error("--runs must be at least 20 and --task-runs at least 1");

const { Daytona } = await import("@daytonaio/sdk");

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "daytona-bench-"));
const tree = path.join(scratch, "tree");
fs.mkdirSync(tree);
for (let i = 0; i < 100; i += 1) fs.writeFileSync(path.join(tree, `f${i}.bin`), Buffer.alloc(10 * 1024, i));
// The host's run-start uploads are tar files with a post-upload `tar -x`.
const tars = ["workspace", "skills", "mcp-config", "config-seed"].map((name) => {
  const file = path.join(scratch, `${name}.tar`);
  execFileSync("tar", ["-cf", file, "-C", tree, "."]);
  return { name, file };
});

const emu = await runEmulator(emulator, {});
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/daytona"));
const client = await startWorker(pkg, { env: {} });
const sdk = new Daytona({ apiKey: emu.credentials.apiKey, apiUrl: emu.url, useDeprecatedPolling: true });
const config = { apiKey: emu.credentials.apiKey, apiUrl: emu.url, timeoutMs: 120_000, autoStopInterval: 0 };
const live = { ...config, liveOutput: true };
const base = (cfg = config) => ({ driverKey: "daytona", companyId: "bench", environmentId: "bench", config: cfg });
let leaseCount = 0;
const acquire = (cfg = config) => client.env.acquireLease({ ...base(cfg), runId: `bench-${leaseCount++}`, agentId: "bench", adapterType: "claude_local" });
const exec = (lease, cfg, command, extra = {}) => client.env.execute({ ...base(cfg), lease, command: "sh", args: ["-c", command], cwd: lease.metadata.remoteCwd, ...extra });

async function taskRun(cfg) {
  const lease = await acquire(cfg);
  const cwd = /** @type {string} */ (lease.metadata.remoteCwd);
  await client.env.realizeWorkspace({ ...base(cfg), lease, workspace: { localPath: scratch, remotePath: cwd } });
  await exec(lease, cfg, 'printf "\\0%s\\0" "$PATH"');
  for (let i = 0; i < 8; i += 1) await exec(lease, cfg, `mkdir -p .paperclip-runtime/github && cat > .paperclip-runtime/github/f${i}.b64`, { stdin: "x".repeat(4096) });
  for (let i = 0; i < 4; i += 1) await exec(lease, cfg, "command -v sh >/dev/null && chmod 700 . 2>/dev/null; true");
  await client.env.syncIn({
    ...base(cfg),
    lease,
    operations: tars.map(({ name, file }) => ({
      operationId: name,
      files: [{ sourcePath: file, targetPath: `${cwd}/.paperclip-runtime/claude/${name}-upload.tar`, kind: "file" }],
      postUploadCommands: [
        {
          command: `mkdir -p ${cwd}/.paperclip-runtime/claude/${name} && tar -xf ${cwd}/.paperclip-runtime/claude/${name}-upload.tar -C ${cwd}/.paperclip-runtime/claude/${name} && rm -f ${cwd}/.paperclip-runtime/claude/${name}-upload.tar`,
          timeoutMs: 120_000,
        },
      ],
    })),
  });
  await exec(lease, cfg, "nohup sleep 30 >/dev/null 2>&1 & echo $! > bridge.pid");
  for (let i = 0; i < 25; i += 1) await exec(lease, cfg, "ls .paperclip-runtime >/dev/null 2>&1; true");
  await exec(lease, cfg, 'kill "$(cat bridge.pid)"; true');
  const back = fs.mkdtempSync(path.join(scratch, "back-"));
  await client.env.syncOut({ ...base(cfg), lease, operations: [{ operationId: "out", files: [{ sourcePath: cwd, targetPath: back, kind: "directory", exclude: [".paperclip-runtime"] }] }] });
  await exec(lease, cfg, "rm -rf .paperclip-runtime/github");
  await client.env.releaseLease({ ...base(cfg), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  fs.rmSync(back, { recursive: true, force: true });
}

const results = {};
const leases = [];
try {
  for (const latencyMs of [0, 40]) {
    emu.faults.clear();
    if (latencyMs > 0) emu.faults.inject({ kind: "latency", ms: latencyMs, route: "*" });
    const lease = await acquire();
    leases.push(lease);
    const sandbox = await sdk.get(lease.providerLeaseId);
    const cwd = lease.metadata.remoteCwd;
    for (let i = 0; i < 5; i += 1) await exec(lease, config, "true"); // warm-up
    await exec(lease, live, "true");
    const row = {};
    row.sdk = await measureRepeated(emu, runs, () => sandbox.process.executeCommand("true"));
    row.execute = await measureRepeated(emu, runs, () => exec(lease, config, "true"));
    row.stdin = await measureRepeated(emu, Math.max(20, runs / 5), () => exec(lease, config, "wc -c >/dev/null", { stdin: "s".repeat(100 * 1024) }));
    row.live = await measureRepeated(emu, runs, () => exec(lease, live, "true"));
    row["sync-in"] = await measureRepeated(emu, Math.max(20, runs / 5), (i) =>
      client.env.syncIn({ ...base(), lease, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: tree, targetPath: `${cwd}/tree`, kind: "directory" }] }] }),
    );
    row["sync-out"] = await measureRepeated(emu, Math.max(20, runs / 5), (i) => {
      const back = path.join(scratch, `out-${latencyMs}-${i}`);
      return client.env
        .syncOut({ ...base(), lease, operations: [{ operationId: `out-${i}`, files: [{ sourcePath: `${cwd}/tree`, targetPath: back, kind: "directory" }] }] })
        .finally(() => fs.rmSync(back, { recursive: true, force: true }));
    });
    row["task (liveOutput off)"] = await measureRepeated(emu, taskRuns, () => taskRun(config));
    row["task (liveOutput on)"] = await measureRepeated(emu, taskRuns, () => taskRun(live));
    results[`${latencyMs} ms`] = row;
    console.log(`\n== ${latencyMs} ms injected latency per request (${runs} runs; task ${taskRuns})`);
    console.log(`${"case".padEnd(22)} ${"median ms".padStart(10)} ${"p95 ms".padStart(9)} ${"calls/op".padStart(9)} ${"x sdk".padStart(7)}`);
    for (const [name, r] of Object.entries(row)) {
      console.log(
        `${name.padEnd(22)} ${r.median.toFixed(1).padStart(10)} ${r.p95.toFixed(1).padStart(9)} ${r.callsPerOp.toFixed(2).padStart(9)} ${(r.median / row.sdk.median).toFixed(2).padStart(7)}`,
      );
    }
  }
} finally {
  emu.faults.clear();
  for (const lease of leases) await client.env.destroyLease({ ...base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }).catch(() => undefined);
  await client.shutdown().catch(() => undefined);
  // Calls the emulator did not serve (no route, UNIMPLEMENTED, refused): a missing route shows here.
  const unserved = emu.requests.unserved();
  console.log(`unserved calls: ${unserved.length ? unserved.map((u) => `${u.count}x ${u.method} ${u.target} (${u.reason})`).join(", ") : "none"}`);
  const left = await emu.leftovers();
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
  if (left.length) console.log(`leftovers: ${left.join(", ")}`);
}

fs.mkdirSync(args.out, { recursive: true });
const report = path.join(args.out, `daytona-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(report, JSON.stringify({ node: process.version, cpus: os.cpus().length, load: os.loadavg(), runs, taskRuns, results }, null, 2));
console.log(`\nreport: ${path.relative(repoRoot, report)}`);
