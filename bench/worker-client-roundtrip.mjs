#!/usr/bin/env node
// Round trip of a trivial `execute` (`true`) on a provider through the worker client, next to a
// bare child_process spawn of `sh -c true` measured in the same run (interleaved, so both see
// the same machine load). Needs the built packages: `npm run build` first.
//
//   node bench/worker-client-roundtrip.mjs [--iterations 300] [--warmup 20]
//        [--plugin-dir providers/fake-plugin] [--driver-key fake-plugin] [--out bench/results]
import { spawn } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { summarize, round } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    iterations: { type: "string", default: "300" },
    warmup: { type: "string", default: "20" },
    "plugin-dir": { type: "string", default: path.join(repoRoot, "providers/fake-plugin") },
    "driver-key": { type: "string", default: "fake-plugin" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const iterations = Number(args.iterations);
const warmup = Number(args.warmup);
if (!(iterations >= 200)) throw new Error("--iterations must be at least 200 for a meaningful p95");

function bareSpawn() {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", "true"], { stdio: "ignore" });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`sh -c true exited ${code}`))));
  });
}

async function timed(fn) {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e6;
}

const pkg = await loadPluginPackage(args["plugin-dir"]);
const client = await startWorker(pkg);
const ids = { companyId: "company-bench", environmentId: "environment-bench" };
const config = { timeoutMs: 60_000 };
const base = { driverKey: args["driver-key"], ...ids, config };
let lease;
try {
  lease = await client.env.acquireLease({
    ...base,
    runId: `run-bench-${Date.now()}`,
    agentId: "agent-bench",
    executionWorkspaceId: "execution-workspace-bench",
    adapterType: "claude_local",
  });
  const remoteCwd = /** @type {string | undefined} */ (lease.metadata?.remoteCwd);
  const executeTrue = async () => {
    const result = await client.env.execute({ ...base, lease, command: "true", cwd: remoteCwd });
    if (result.exitCode !== 0) throw new Error(`execute true exited ${result.exitCode}: ${result.stderr}`);
  };

  for (let i = 0; i < warmup; i++) {
    await executeTrue();
    await bareSpawn();
  }
  const client_ms = [];
  const spawn_ms = [];
  for (let i = 0; i < iterations; i++) {
    // Alternate which goes first so neither always runs right after the other's cleanup.
    if (i % 2 === 0) {
      client_ms.push(await timed(executeTrue));
      spawn_ms.push(await timed(bareSpawn));
    } else {
      spawn_ms.push(await timed(bareSpawn));
      client_ms.push(await timed(executeTrue));
    }
  }

  const clientStats = summarize(client_ms);
  const spawnStats = summarize(spawn_ms);
  const ratio = clientStats.median / spawnStats.median;

  const rows = [
    ["", "median ms", "p95 ms", "mean ms", "min ms", "max ms"],
    [`worker client execute \`true\` (${pkg.name})`, clientStats],
    ["bare spawn sh -c true", spawnStats],
  ].map((row, index) => (index === 0 ? row : [row[0], ...["median", "p95", "mean", "min", "max"].map((k) => row[1][k].toFixed(2))]));
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  for (const row of rows) console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join("  "));
  console.log(`\nratio (median worker client / median bare spawn): ${ratio.toFixed(2)}x over ${iterations} calls each`);

  const report = {
    benchmark: "worker-client-roundtrip",
    date: new Date().toISOString(),
    plugin: { name: pkg.name, version: pkg.version, driverKey: args["driver-key"] },
    iterations,
    warmup,
    machine: { node: process.version, platform: process.platform, cpus: os.cpus().length, loadavg: os.loadavg().map(round) },
    workerClientExecuteTrue: Object.fromEntries(Object.entries(clientStats).map(([k, v]) => [k, round(v)])),
    bareSpawnShTrue: Object.fromEntries(Object.entries(spawnStats).map(([k, v]) => [k, round(v)])),
    ratioMedian: round(ratio),
  };
  await mkdir(args.out, { recursive: true });
  const file = path.join(args.out, `worker-client-roundtrip-${report.date.replace(/[:.]/g, "-")}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`wrote ${path.relative(process.cwd(), file)}`);
} finally {
  if (lease?.providerLeaseId) {
    await client.env.destroyLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }).catch((error) => console.error(`destroy failed: ${error.message}`));
  }
  await client.shutdown();
}
