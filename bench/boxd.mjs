#!/usr/bin/env node
// Benchmarks of the boxd provider against the boxd emulator (gRPC on loopback, the provider's own
// grpc-js client in the worker), at 0 ms and 40 ms of latency injected before every gRPC call (the
// emulator kit's latency fault):
//   baseline    one raw `Exec` of `true` through the provider's client, in-process (one gRPC call)
//   execute     `true`; `cat` with 2 KiB of stdin (inline); `cat` with 64 KiB (staged by WriteFile)
//   sync        syncIn / syncOut of one 64 KiB file through the worker (the kit's streamed tar sync)
//   suspend     release of a reusable lease (SuspendVm) and its resume (ResumeVm + the sentinel check)
//   stop        a release with cancelActiveWork (what a host sends to end work: a cold StopVm,
//               confirmed) and the resume that starts it again
//   release     a plain release (DestroyVm, answered once GetVm no longer finds the machine)
// Every figure comes with the gRPC calls the emulator's recorder saw (median per operation); the
// token exchanges of the whole run are counted too. Needs the built packages (`npm run build`).
//
//   node bench/boxd.mjs [--runs 50] [--cycles 10] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/boxd/dist/index.js";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { createBoxdApi, createTokenCache } from "../providers/boxd/dist/index.js";
import { measured } from "./lib/recorded.mjs";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "50" },
    cycles: { type: "string", default: "10" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const cycles = Number(args.cycles);
if (!(runs >= 10)) throw new Error("--runs must be at least 10");
if (!(cycles >= 3)) throw new Error("--cycles must be at least 3");

/** @type {import("../emulators/boxd/dist/index.js").BoxdEmulatorControl} */
let control;
const emu = await runEmulator(emulator, { options: { expose: (c) => (control = c) } });
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "boxd-bench-"));
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/boxd"));
// The command channel off: a channel is one Exec that lives as long as the lease, so the recorder
// is never idle; bench/command-channel.mjs measures boxd with and without it.
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir(), PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "off" } });
const config = { apiKey: emu.credentials.apiKey, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange, timeoutMs: 120_000 };
const reuseConfig = { ...config, reuseLease: true };
const base = { driverKey: "boxd", companyId: "bench", environmentId: "bench", config };
const reuseBase = { ...base, config: reuseConfig };
const results = { node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs, cycles, latency: {} };

async function series(count, work) {
  const times = [];
  const calls = [];
  let names = [];
  for (let i = 0; i < count; i += 1) {
    const sample = await measured(emu, work);
    times.push(sample.ms);
    calls.push(sample.calls.length);
    names = sample.calls;
  }
  return { ms: summarize(times), calls: summarize(calls).median, example: names };
}

function file(name, bytes) {
  const target = path.join(scratch, name);
  fs.writeFileSync(target, Buffer.alloc(bytes, 97));
  return target;
}

/** One raw Exec of `true` through the provider's client (in-process): the floor of an execute. */
async function baseline(machineId, api) {
  const call = await api.exec(machineId, "true", { stdout: () => undefined, stderr: () => undefined });
  call.end();
  await call.exited;
}

try {
  for (const latencyMs of [0, 40]) {
    emu.faults.clear();
    if (latencyMs > 0) emu.faults.inject({ kind: "latency", route: "*", ms: latencyMs });
    const row = {};
    const acquired = await measured(emu, () => client.env.acquireLease({ ...base, runId: `bench-${latencyMs}` }));
    const lease = acquired.value;
    row.acquire = { ms: acquired.ms, calls: acquired.calls.length, example: acquired.calls };
    const api = createBoxdApi({ apiKey: config.apiKey, apiUrl: config.apiUrl, exchangeUrl: config.exchangeUrl, tokens: createTokenCache() });
    try {
      for (let i = 0; i < 5; i += 1) await client.env.execute({ ...base, lease, command: "true" });
      row.baseline = await series(runs, () => baseline(lease.providerLeaseId, api));
      row.execute = await series(runs, () => client.env.execute({ ...base, lease, command: "true" }));
      row.executeStdin = await series(runs, () => client.env.execute({ ...base, lease, command: "cat", stdin: "x".repeat(2048) }));
      row.executeStaged = await series(runs, () => client.env.execute({ ...base, lease, command: "cat", stdin: "x".repeat(64 * 1024) }));
      const source = file("sync-64k", 64 * 1024);
      const target = `${lease.metadata.remoteCwd}/sync-64k`;
      row.syncIn = await series(Math.min(runs, 30), () =>
        client.env.syncIn({ ...base, lease, operations: [{ operationId: "in", files: [{ sourcePath: source, targetPath: target, kind: "file" }] }] }),
      );
      row.syncOut = await series(Math.min(runs, 30), () =>
        client.env.syncOut({ ...base, lease, operations: [{ operationId: "out", files: [{ sourcePath: target, targetPath: path.join(scratch, "sync-64k-back"), kind: "file" }] }] }),
      );
    } finally {
      const released = await measured(emu, () => client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }));
      row.release = { ms: released.ms, calls: released.calls.length, example: released.calls };
      api.close();
    }

    // Reusable lease: suspend at release, resume; then a release with cancelActiveWork (a cold stop,
    // what a 2026.916.1 host sends to end work; newer hosts' onEnvironmentStopLease does the same) and its resume.
    let kept = await client.env.acquireLease({ ...reuseBase, runId: `bench-reuse-${latencyMs}`, agentId: "bench", executionWorkspaceId: "bench-ws" });
    const suspend = [];
    const resume = [];
    for (let i = 0; i < cycles; i += 1) {
      await client.env.execute({ ...reuseBase, lease: kept, command: "true" });
      suspend.push(await measured(emu, () => client.env.releaseLease({ ...reuseBase, providerLeaseId: kept.providerLeaseId, leaseMetadata: kept.metadata })));
      const r = await measured(emu, () => client.env.resumeLease({ ...reuseBase, providerLeaseId: kept.providerLeaseId, leaseMetadata: kept.metadata }));
      resume.push(r);
      kept = r.value;
    }
    row.suspend = { ms: summarize(suspend.map((s) => s.ms)), calls: summarize(suspend.map((s) => s.calls.length)).median, example: suspend.at(-1).calls };
    row.resumeFromSuspend = { ms: summarize(resume.map((s) => s.ms)), calls: summarize(resume.map((s) => s.calls.length)).median, example: resume.at(-1).calls };
    await client.env.destroyLease({ ...reuseBase, providerLeaseId: kept.providerLeaseId, leaseMetadata: kept.metadata });

    let cold = await client.env.acquireLease({ ...reuseBase, runId: `bench-stop-${latencyMs}`, agentId: "bench", executionWorkspaceId: "bench-ws-2" });
    const stop = [];
    const start = [];
    for (let i = 0; i < cycles; i += 1) {
      stop.push(await measured(emu, () => client.env.releaseLease({ ...reuseBase, providerLeaseId: cold.providerLeaseId, leaseMetadata: cold.metadata, cancelActiveWork: true })));
      const r = await measured(emu, () => client.env.resumeLease({ ...reuseBase, providerLeaseId: cold.providerLeaseId, leaseMetadata: cold.metadata }));
      start.push(r);
      cold = r.value;
    }
    row.stop = { ms: summarize(stop.map((s) => s.ms)), calls: summarize(stop.map((s) => s.calls.length)).median, example: stop.at(-1).calls };
    row.resumeFromStop = { ms: summarize(start.map((s) => s.ms)), calls: summarize(start.map((s) => s.calls.length)).median, example: start.at(-1).calls };
    await client.env.destroyLease({ ...reuseBase, providerLeaseId: cold.providerLeaseId, leaseMetadata: cold.metadata });
    results.latency[latencyMs] = row;

    const f = (s) => `${s.ms.median.toFixed(1)} ms (p95 ${s.ms.p95.toFixed(1)}), ${s.calls} calls`;
    console.log(`\n== boxd, ${latencyMs} ms injected per gRPC call`);
    console.log(`acquire               ${row.acquire.ms.toFixed(1)} ms, ${row.acquire.calls} calls: ${row.acquire.example.join(" ")}`);
    console.log(`raw Exec (baseline)   ${f(row.baseline)}`);
    console.log(`execute true          ${f(row.execute)} (${(row.execute.ms.median / row.baseline.ms.median).toFixed(2)}x baseline)`);
    console.log(`execute 2 KiB stdin   ${f(row.executeStdin)}`);
    console.log(`execute 64 KiB stdin  ${f(row.executeStaged)}: ${row.executeStaged.example.join(" ")}`);
    console.log(`syncIn 64 KiB         ${f(row.syncIn)}`);
    console.log(`syncOut 64 KiB        ${f(row.syncOut)}`);
    console.log(`release (delete)      ${row.release.ms.toFixed(1)} ms, ${row.release.calls} calls: ${row.release.example.join(" ")}`);
    console.log(`suspend (release)     ${f(row.suspend)}: ${row.suspend.example.join(" ")}`);
    console.log(`resume from suspend   ${f(row.resumeFromSuspend)}: ${row.resumeFromSuspend.example.join(" ")}`);
    console.log(`stop (cold)           ${f(row.stop)}: ${row.stop.example.join(" ")}`);
    console.log(`resume from stop      ${f(row.resumeFromStop)}: ${row.resumeFromStop.example.join(" ")}`);
  }
  results.tokenExchanges = control.exchanges(config.apiKey);
  console.log(`\ntoken exchanges in the whole run: ${results.tokenExchanges} (the worker once, the baseline client once per latency)`);
  fs.mkdirSync(args.out, { recursive: true });
  const report = path.join(args.out, `boxd-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  fs.writeFileSync(report, JSON.stringify(results, null, 2));
  console.log(`report: ${report}`);
} finally {
  emu.faults.clear();
  await client.shutdown?.().catch(() => undefined);
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
