#!/usr/bin/env node
// Benchmarks of the bubblewrap provider through the worker client (forked as the host forks it):
//   cold      acquire -> first byte of the first command's output (execute.log), per fresh lease
//   release   releaseLease until its receipt, for those same leases
//   execute   steady `true` round trip on one warm lease, interleaved with a bare `sh -c true` spawn
//   duplex    64-byte echo round trip over a `cat` duplex channel on that lease, and an 8 MiB echo
//   resume    resumeLease of a stopped reusable lease (and resume -> first output)
//   sync      syncIn / syncOut of a 100 MiB tree of 10,000 files, with the worker's peak RSS (VmHWM)
//   idle      private memory (Private_Clean + Private_Dirty of every host process of its jail: keeper,
//             bwrap, init, supervisor) per idle lease, kept resident (idle stop 0, a second worker)
//             and with idle stop (--idle-ms, this worker); the first execute after a dormant period
//             (a fresh jail on the same disk) and after a pause just short of it (ping first), next
//             to the steady execute (--idle-runs each)
// Needs the built packages (`npx tsc -b providers/bubblewrap`). Medians are over --runs (>= 100);
// sync runs are set separately (--sync-runs) because each moves 200 MiB through a shared disk.
//
//   node bench/bubblewrap.mjs [--runs 100] [--sync-runs 100] [--idle-runs 20] [--idle-ms 2000] [--out bench/results]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    "sync-runs": { type: "string", default: "100" },
    "sync-files": { type: "string", default: "10000" },
    "sync-mib": { type: "string", default: "100" },
    "idle-runs": { type: "string", default: "20" },
    "idle-ms": { type: "string", default: "2000" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const idleRuns = Number(args["idle-runs"]);
const idleMs = Number(args["idle-ms"]);
const IDLE_ENV = "PAPERCLIP_BUBBLEWRAP_IDLE_STOP_MS";
const syncRuns = Number(args["sync-runs"]);
if (!(runs >= 100)) throw new Error("--runs must be at least 100");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
function bareSpawn() {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", "true"], { stdio: "ignore" });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}
/** Every host process of a lease's jail (its keeper and all below it) with its private memory in KiB. */
function leaseMemory(leaseId) {
  let keeper;
  try {
    keeper = JSON.parse(fs.readFileSync(path.join(stateDir, "leases", leaseId, "sandbox.json"), "utf8")).jail?.keeperPid;
  } catch {
    return { kib: 0, processes: {} };
  }
  const children = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {}
  }
  const processes = {};
  let kib = 0;
  for (const pending = keeper ? [keeper] : []; pending.length > 0; ) {
    const pid = pending.pop();
    try {
      const rollup = fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
      const field = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(rollup)?.[1] ?? 0);
      const own = field("Private_Clean") + field("Private_Dirty");
      const name = fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      processes[name] = (processes[name] ?? 0) + own;
      kib += own;
      pending.push(...(children.get(pid) ?? []));
    } catch {}
  }
  return { kib, processes };
}
const keeperGone = (leaseId) => leaseMemory(leaseId).kib === 0;

function status(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { hwmMiB: kb("VmHWM") / 1024, rssMiB: kb("VmRSS") / 1024 };
}

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-bench-"));
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-bench-data-"));
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/bubblewrap"));
// The worker's host-side scratch (sync spools) follows this process's TMPDIR, like the lease state:
// `TMPDIR=/dev/shm node bench/bubblewrap.mjs` measures the mechanics without the disk.
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir(), [IDLE_ENV]: String(idleMs) } });
const config = { stateDir, timeoutMs: 120_000 };
const base = (cfg = config) => ({ driverKey: "bubblewrap", companyId: "bench", environmentId: "bench", config: cfg });
const live = new Set();
const results = {};

async function acquire(cfg = config) {
  // As the host sends it: a kept lease belongs to one agent and one execution workspace.
  const lease = await client.env.acquireLease({ ...base(cfg), runId: `bench-${live.size}`, agentId: "bench", executionWorkspaceId: "bench-ws" });
  live.add(lease.providerLeaseId);
  return lease;
}
async function firstOutput(lease, cfg = config) {
  let first = null;
  const started = process.hrtime.bigint();
  await client.env.execute({ ...base(cfg), lease, command: "echo", args: ["ready"] }, { onLog: () => (first ??= ms(started)) });
  return first ?? ms(started);
}

try {
  // Warm-up: page cache, JIT in the worker, one jail.
  for (let i = 0; i < 5; i += 1) {
    const lease = await acquire();
    await firstOutput(lease);
    await client.env.releaseLease({ ...base(), providerLeaseId: lease.providerLeaseId });
    live.delete(lease.providerLeaseId);
  }

  // Cold acquire -> first output, then release with receipt, on fresh leases.
  const cold = [];
  const coldAcquireCall = [];
  const release = [];
  for (let i = 0; i < runs; i += 1) {
    const started = process.hrtime.bigint();
    const lease = await acquire();
    coldAcquireCall.push(ms(started));
    let first = null;
    await client.env.execute({ ...base(), lease, command: "echo", args: ["ready"] }, { onLog: () => (first ??= ms(started)) });
    cold.push(first ?? ms(started));
    const releaseStart = process.hrtime.bigint();
    const receipt = await client.env.releaseLease({ ...base(), providerLeaseId: lease.providerLeaseId });
    release.push(ms(releaseStart));
    if (receipt?.state !== "destroyed") throw new Error(`unexpected receipt ${JSON.stringify(receipt)}`);
    live.delete(lease.providerLeaseId);
  }
  results.coldAcquireToFirstOutput = summarize(cold);
  results.acquireCallOnly = summarize(coldAcquireCall);
  results.releaseWithReceipt = summarize(release);

  // Steady execute vs bare spawn, interleaved (alternating order) on one warm lease.
  const lease = await acquire();
  for (let i = 0; i < 10; i += 1) await client.env.execute({ ...base(), lease, command: "true" });
  const exec = [];
  const bare = [];
  for (let i = 0; i < runs; i += 1) {
    const runExec = async () => {
      const s = process.hrtime.bigint();
      const r = await client.env.execute({ ...base(), lease, command: "true" });
      if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`);
      exec.push(ms(s));
    };
    const runBare = async () => {
      const s = process.hrtime.bigint();
      await bareSpawn();
      bare.push(ms(s));
    };
    if (i % 2 === 0) {
      await runExec();
      await runBare();
    } else {
      await runBare();
      await runExec();
    }
  }
  results.steadyExecute = summarize(exec);
  results.bareSpawn = summarize(bare);
  results.executeOverBare = results.steadyExecute.median / results.bareSpawn.median;

  // Idle: what an idle lease holds, resident vs dormant, and what waking costs.
  {
    const resident = await startWorker(pkg, { env: { TMPDIR: os.tmpdir(), [IDLE_ENV]: "0" } });
    const sleep = (t) => new Promise((resolve) => setTimeout(resolve, t));
    try {
      const idleLeases = async (worker, count) => {
        const leases = [];
        for (let i = 0; i < count; i += 1) {
          const l = await worker.env.acquireLease({ ...base(), runId: `bench-idle-${i}`, agentId: "bench", executionWorkspaceId: "bench-ws" });
          live.add(l.providerLeaseId);
          await worker.env.execute({ ...base(), lease: l, command: "true" });
          leases.push(l);
        }
        return leases;
      };
      const residentLeases = await idleLeases(resident, 5);
      const dormantLeases = await idleLeases(client, 5);
      for (const until = Date.now() + idleMs * 4; Date.now() < until && !dormantLeases.every((l) => keeperGone(l.providerLeaseId)); ) await sleep(50);
      await sleep(Math.max(0, idleMs * 1.5 - 0));
      const residentMemory = residentLeases.map((l) => leaseMemory(l.providerLeaseId));
      const dormantMemory = dormantLeases.map((l) => leaseMemory(l.providerLeaseId));
      for (const l of residentLeases) {
        await resident.env.destroyLease({ ...base(), providerLeaseId: l.providerLeaseId });
        live.delete(l.providerLeaseId);
      }
      const afterIdle = [];
      const afterPause = [];
      const probe = dormantLeases[0];
      for (let i = 0; i < idleRuns; i += 1) {
        for (const until = Date.now() + idleMs * 4; Date.now() < until && !keeperGone(probe.providerLeaseId); ) await sleep(20);
        let s = process.hrtime.bigint();
        let r = await client.env.execute({ ...base(), lease: probe, command: "true" });
        if (r.exitCode !== 0) throw new Error(`true after idle exited ${r.exitCode}`);
        afterIdle.push(ms(s));
        await sleep(idleMs - 500);
        s = process.hrtime.bigint();
        r = await client.env.execute({ ...base(), lease: probe, command: "true" });
        if (r.exitCode !== 0) throw new Error(`true after a pause exited ${r.exitCode}`);
        afterPause.push(ms(s));
      }
      for (const l of dormantLeases) {
        await client.env.destroyLease({ ...base(), providerLeaseId: l.providerLeaseId });
        live.delete(l.providerLeaseId);
      }
      results.idle = {
        idleMs,
        residentPrivateKiBPerLease: summarize(residentMemory.map((m) => m.kib)),
        residentBreakdownKiB: residentMemory[0].processes,
        dormantPrivateKiBPerLease: summarize(dormantMemory.map((m) => m.kib)),
        firstExecuteAfterIdle: summarize(afterIdle),
        executeAfterPauseJustShortOfIdle: summarize(afterPause),
      };
    } finally {
      await resident.shutdown();
    }
  }

  // Duplex channel (the host's HTTP/2 bridge path): one `cat` channel on the same lease; a 64-byte
  // write until its echo arrives, against the steady execute above (what one file-bridge step costs),
  // and 8 MiB echoed in 256 KiB writes.
  {
    let received = 0;
    let sent = 0;
    let wake = () => undefined;
    const channel = await client.duplex.open(
      { hostRouteId: "bench-route", driverKey: "bubblewrap", companyId: "bench", environmentId: "bench", providerLeaseId: lease.providerLeaseId, command: ["cat"] },
      {
        onData: (chunk) => {
          received += chunk.length;
          wake();
        },
        onExit: () => wake(),
      },
    );
    const allEchoed = () =>
      new Promise((resolve) => {
        wake = () => received >= sent && resolve();
        wake();
      });
    const write = async (bytes) => {
      sent += bytes.length;
      await channel.write(bytes);
    };
    const message = Buffer.alloc(64, 0x61);
    for (let i = 0; i < 10; i += 1) {
      await write(message);
      await allEchoed();
    }
    const roundTrip = [];
    for (let i = 0; i < runs; i += 1) {
      const s = process.hrtime.bigint();
      await write(message);
      await allEchoed();
      roundTrip.push(ms(s));
    }
    const chunk = Buffer.alloc(256 * 1024, 0x62);
    const bulkStart = process.hrtime.bigint();
    for (let i = 0; i < 32; i += 1) await write(chunk);
    await allEchoed();
    results.duplexEcho8MiBMs = ms(bulkStart);
    await channel.close();
    results.duplexRoundTrip = summarize(roundTrip);
    results.executeOverDuplexRoundTrip = results.steadyExecute.median / results.duplexRoundTrip.median;
  }

  // Resume of a stopped reusable lease.
  const reuse = { ...config, reuseLease: true };
  const reusable = await acquire(reuse);
  const resume = [];
  const resumeToOutput = [];
  for (let i = 0; i < runs; i += 1) {
    const stopped = await client.env.releaseLease({ ...base(reuse), providerLeaseId: reusable.providerLeaseId, leaseMetadata: reusable.metadata });
    if (stopped?.state !== "stopped") throw new Error(`unexpected receipt ${JSON.stringify(stopped)}`);
    const s = process.hrtime.bigint();
    const resumed = await client.env.resumeLease({ ...base(reuse), providerLeaseId: reusable.providerLeaseId, leaseMetadata: reusable.metadata });
    resume.push(ms(s));
    if (resumed.providerLeaseId !== reusable.providerLeaseId) throw new Error("resume returned another lease");
    let first = null;
    await client.env.execute({ ...base(reuse), lease: resumed, command: "echo", args: ["ready"] }, { onLog: () => (first ??= ms(s)) });
    resumeToOutput.push(first ?? ms(s));
  }
  results.resume = summarize(resume);
  results.resumeToFirstOutput = summarize(resumeToOutput);
  await client.env.destroyLease({ ...base(reuse), providerLeaseId: reusable.providerLeaseId });
  live.delete(reusable.providerLeaseId);

  // Sync: a tree of N files totalling M MiB, in and out, with the worker's peak RSS.
  const files = Number(args["sync-files"]);
  const totalBytes = Number(args["sync-mib"]) * 1024 * 1024;
  const source = path.join(scratch, "tree");
  const fileBytes = Math.floor(totalBytes / files);
  const chunk = Buffer.alloc(fileBytes, 0x61);
  for (let i = 0; i < files; i += 1) {
    const dir = path.join(source, `d${i % 100}`);
    if (i < 100) fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `f${i}.txt`), chunk);
  }
  const before = status(client.pid);
  const syncIn = [];
  const syncOut = [];
  const hwm = [];
  const rss = [];
  for (let i = 0; i < syncRuns; i += 1) {
    const s1 = process.hrtime.bigint();
    const sin = await client.env.syncIn({ ...base(), lease, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: source, targetPath: "/workspace/tree", kind: "directory" }] }] });
    syncIn.push(ms(s1));
    const target = path.join(scratch, `out-${i}`);
    const s2 = process.hrtime.bigint();
    const sout = await client.env.syncOut({ ...base(), lease, operations: [{ operationId: `out-${i}`, files: [{ sourcePath: "/workspace/tree", targetPath: target, kind: "directory" }] }] });
    syncOut.push(ms(s2));
    if (sin.operations[0].filesTransferred < files || sout.operations[0].filesTransferred < files) {
      throw new Error(`sync moved ${sin.operations[0].filesTransferred}/${sout.operations[0].filesTransferred} of ${files} files`);
    }
    fs.rmSync(target, { recursive: true, force: true });
    const now = status(client.pid);
    hwm.push(now.hwmMiB);
    rss.push(now.rssMiB);
  }
  // Current RSS after each run, at the quartiles of the run sequence: growth here would be a leak,
  // while the peak (HWM) can only rise.
  const rssTrend = [0, 0.25, 0.5, 0.75, 1].map((q) => Math.round(rss[Math.min(rss.length - 1, Math.floor(q * (rss.length - 1)))] ?? 0));
  results.sync = {
    files,
    mib: totalBytes / 1024 / 1024,
    in: summarize(syncIn),
    out: summarize(syncOut),
    workerRss: { beforeSyncMiB: before, peakAfterFirstRunMiB: hwm[0], peakAfterLastRunMiB: hwm.at(-1), rssAfterRunQuartilesMiB: rssTrend },
  };
  await client.env.releaseLease({ ...base(), providerLeaseId: lease.providerLeaseId });
  live.delete(lease.providerLeaseId);
} finally {
  for (const leaseId of live) await client.env.destroyLease({ ...base(), providerLeaseId: leaseId }).catch(() => undefined);
  await client.shutdown();
  fs.rmSync(stateDir, { recursive: true, force: true });
  fs.rmSync(scratch, { recursive: true, force: true });
}

const report = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), uid: process.getuid(), runs, syncRuns, results };
/** @type {[string, number, string][]} */
const targets = [
  ["cold acquire -> first output", results.coldAcquireToFirstOutput.median, "< 150 ms"],
  ["release with receipt", results.releaseWithReceipt.median, "(no target)"],
  ["steady execute", results.steadyExecute.median, `<= 3x bare (${(3 * results.bareSpawn.median).toFixed(2)} ms)`],
  ["bare sh -c true", results.bareSpawn.median, ""],
  ["duplex 64 B echo round trip", results.duplexRoundTrip.median, "(no target)"],
  ["resume", results.resume.median, "< 50 ms"],
  ["resume -> first output", results.resumeToFirstOutput.median, ""],
  [`syncIn ${results.sync.mib} MiB/${results.sync.files} files`, results.sync.in.median, "< 2000 ms"],
  [`syncOut ${results.sync.mib} MiB/${results.sync.files} files`, results.sync.out.median, "< 2000 ms"],
];
console.log(
  `bubblewrap bench (uid ${process.getuid()}, node ${process.version}, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")})`,
);
for (const [name, value, target] of targets) console.log(`${name.padEnd(36)} median ${value.toFixed(2).padStart(9)} ms  ${target}`);
console.log(`execute / bare ratio: ${results.executeOverBare.toFixed(2)}x`);
console.log(`execute / duplex round trip: ${results.executeOverDuplexRoundTrip.toFixed(2)}x; duplex 8 MiB echo ${results.duplexEcho8MiBMs.toFixed(0)} ms`);
console.log(`worker RSS: ${JSON.stringify(results.sync.workerRss)}`);
console.log(
  `idle lease private memory (median of 5): resident ${results.idle.residentPrivateKiBPerLease.median} KiB ${JSON.stringify(results.idle.residentBreakdownKiB)}, ` +
    `dormant after ${idleMs} ms ${results.idle.dormantPrivateKiBPerLease.median} KiB (target <= 1024 KiB)`,
);
console.log(
  `first execute after idle ${results.idle.firstExecuteAfterIdle.median.toFixed(2)} ms, after a pause of ${idleMs - 500} ms (ping first) ` +
    `${results.idle.executeAfterPauseJustShortOfIdle.median.toFixed(2)} ms, steady execute ${results.steadyExecute.median.toFixed(2)} ms`,
);
fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `bubblewrap-${report.date.replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
console.log(`report: ${path.relative(repoRoot, file)}`);
