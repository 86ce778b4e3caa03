#!/usr/bin/env node
// Vendor calls and time of the e2b and novita providers against the envd emulator, each through its
// built worker (forked as the host forks it) and the real SDK, at 0 ms and 40 ms injected latency
// per vendor call (the emulator delays every request before answering):
//   execute   a plain `true` on a warm lease (the host's ~50 per run), and one with 1 KiB of stdin
//   sync      syncIn / syncOut of a tree of --sync-files files, --sync-mib MiB in all, through the
//             provider (envd's /files API: the kit's file-API tar sync); next to it, side by side on
//             the same sandbox and the same runner, the kit's base64-over-exec sync (what upstream's
//             e2b plugin falls back to) and the same file-API sync, both in this process
//   task run  a host-like run: acquire, realize, 52 executes (9 with stdin), 4 concurrent syncIns
//             with post-upload commands, 1 syncOut, release (HOST-CALLS.md §1)
// Vendor calls are the emulator's recorded requests. Needs `npm run build`.
//
//   node bench/envd.mjs [--provider e2b|novita|both] [--runs 100] [--sync-runs 3] [--latency 0,40]
//                       [--sync-files 10000] [--sync-mib 100] [--task-runs 3] [--out bench/results]
//                       [--scratch DIR]   (host side: tree, targets, worker TMPDIR; default the OS temp dir)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator, SANDBOX_HOME } from "../emulators/envd/dist/index.js";
import { base64SyncIn, base64SyncOut, createStreamedProcessRunner, envdFileTransport, envdProcessApi, fileApiSyncIn, fileApiSyncOut, withRemoteGroupKill } from "../packages/kit/dist/index.js";
import { summarize } from "./lib/stats.mjs";
import { makeTree, treeDigest } from "./lib/tree.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    provider: { type: "string", default: "both" },
    runs: { type: "string", default: "100" },
    "sync-runs": { type: "string", default: "3" },
    "sync-files": { type: "string", default: "10000" },
    "sync-mib": { type: "string", default: "100" },
    "task-runs": { type: "string", default: "3" },
    latency: { type: "string", default: "0,40" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
    // Where the host side lives: the tree, every sync-out target, the worker's TMPDIR. On this
    // machine's disk (ext4, online discard) removing 10,000 files stalls the next creates for
    // seconds, the same for every strategy; a tmpfs here measures the strategies themselves.
    scratch: { type: "string", default: os.tmpdir() },
  },
});
const runs = Number(args.runs);
const syncRuns = Number(args["sync-runs"]);
const taskRuns = Number(args["task-runs"]);
const latencies = args.latency.split(",").map(Number);
const providers = args.provider === "both" ? ["e2b", "novita"] : [args.provider];
if (!(runs >= 1 && syncRuns >= 1 && taskRuns >= 1)) throw new Error("--runs, --sync-runs and --task-runs must be at least 1");
for (const p of providers) if (!["e2b", "novita"].includes(p)) throw new Error(`--provider: e2b, novita or both (got ${p})`);

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
/** Vendor calls since `mark`, in all and by route. */
async function callsSince(emu, mark) {
  await emu.requests.idle(10_000);
  const records = emu.requests.list({ since: mark });
  const byRoute = {};
  for (const r of records) byRoute[`${r.method} ${r.route}`] = (byRoute[`${r.method} ${r.route}`] ?? 0) + 1;
  return { total: records.length, byRoute };
}
/** The keepalive refreshes run on their own timer; they are not part of an execute or a sync. */
const withoutKeepalive = (calls) => {
  const refresh = calls.byRoute["POST /sandboxes/:id/timeout"] ?? 0;
  return { ...calls, total: calls.total - refresh };
};

const scratch = fs.mkdtempSync(path.join(args.scratch, "envd-bench-"));
const syncFiles = Number(args["sync-files"]);
const syncBytes = Number(args["sync-mib"]) * 1024 * 1024;
const tree = path.join(scratch, "tree");
makeTree(tree, syncFiles, syncBytes);
const treeSha = treeDigest(tree);
// The host's run-start uploads: four small tars, each followed by a post-upload `tar -x`.
const smallTars = [];
for (let i = 0; i < 4; i += 1) {
  const src = path.join(scratch, `small-${i}`);
  makeTree(src, 20, 64 * 1024);
  smallTars.push(src);
}

const report = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: os.cpus().length,
  loadavg: os.loadavg(),
  scratch: args.scratch,
  runs,
  syncRuns,
  taskRuns,
  syncFiles,
  syncMiB: syncBytes / 1024 / 1024,
  results: {},
};

const emu = await runEmulator(emulator, { options: { maxSandboxes: 50 } });
// An interrupted run still destroys its jails.
for (const name of ["SIGINT", "SIGTERM"]) {
  process.once(name, () => {
    void emu.close().finally(() => {
      fs.rmSync(scratch, { recursive: true, force: true });
      process.exit(130);
    });
  });
}
try {
  for (const provider of providers) {
    const pkg = await loadPluginPackage(path.join(repoRoot, "providers", provider));
    // The vendor exec per command (bench/command-channel.mjs measures the kit's command channel beside it).
    const client = await startWorker(pkg, { env: { TMPDIR: args.scratch, PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "off" } });
    const workspace = `${SANDBOX_HOME}/paperclip-workspace`;
    const config = { apiKey: emu.credentials.apiKey, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 600_000, ...(provider === "novita" ? { requestedCwd: workspace } : {}) };
    const base = { driverKey: provider, companyId: "bench", environmentId: "bench", config };
    const sdk = await import(provider === "e2b" ? "e2b" : "novita-sandbox");
    const live = new Set();
    const acquire = async (extra = {}) => {
      const lease = await client.env.acquireLease({ ...base, runId: `bench-${Date.now()}-${live.size}`, agentId: "bench", ...extra });
      live.add(lease.providerLeaseId);
      return lease;
    };
    const release = async (lease) => {
      await client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
      live.delete(lease.providerLeaseId);
    };
    const exec = (lease, command, args = [], extra = {}) => client.env.execute({ ...base, lease, command, args, cwd: lease.metadata.remoteCwd, timeoutMs: 60_000, ...extra });
    const results = (report.results[provider] = {});
    try {
      for (const latencyMs of latencies) {
        emu.faults.clear();
        if (latencyMs > 0) emu.faults.inject({ kind: "latency", ms: latencyMs, route: "*" });
        /** @type {Record<string, any>} */
        const at = (results[`${latencyMs}ms`] = {});
        const lease = await acquire();
        const ws = /** @type {string} */ (lease.metadata.remoteCwd);
        for (let i = 0; i < 3; i += 1) await exec(lease, "true"); // warm-up

        // Execute: plain, then with stdin.
        const plain = [];
        let mark = emu.requests.mark();
        for (let i = 0; i < runs; i += 1) {
          const s = process.hrtime.bigint();
          const r = await exec(lease, "true");
          plain.push(ms(s));
          if (r.exitCode !== 0) throw new Error(`execute failed: ${JSON.stringify(r)}`);
        }
        let calls = withoutKeepalive(await callsSince(emu, mark));
        at.execute = { ...summarize(plain), callsPerExecute: calls.total / runs, calls: calls.byRoute };
        const withStdin = [];
        const stdin = "x".repeat(1024);
        mark = emu.requests.mark();
        const stdinRuns = Math.max(1, Math.floor(runs / 2));
        for (let i = 0; i < stdinRuns; i += 1) {
          const s = process.hrtime.bigint();
          const r = await exec(lease, "wc", ["-c"], { stdin });
          withStdin.push(ms(s));
          if (r.stdout.trim() !== "1024") throw new Error(`stdin execute: ${JSON.stringify(r)}`);
        }
        calls = withoutKeepalive(await callsSince(emu, mark));
        at.executeWithStdin = { ...summarize(withStdin), callsPerExecute: calls.total / stdinRuns, calls: calls.byRoute };

        // Sync through the provider (file API), each direction checked byte for byte.
        const syncIn = [];
        const syncOut = [];
        let inCalls;
        let outCalls;
        for (let i = 0; i < syncRuns; i += 1) {
          mark = emu.requests.mark();
          let s = process.hrtime.bigint();
          const sin = await client.env.syncIn({ ...base, lease, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: tree, targetPath: `${ws}/tree`, kind: "directory" }] }] });
          syncIn.push(ms(s));
          inCalls = withoutKeepalive(await callsSince(emu, mark));
          const target = path.join(scratch, `out-${provider}-${latencyMs}-${i}`);
          mark = emu.requests.mark();
          s = process.hrtime.bigint();
          const sout = await client.env.syncOut({ ...base, lease, operations: [{ operationId: `out-${i}`, files: [{ sourcePath: `${ws}/tree`, targetPath: target, kind: "directory" }] }] });
          syncOut.push(ms(s));
          outCalls = withoutKeepalive(await callsSince(emu, mark));
          if (sin.operations[0].filesTransferred < syncFiles || sout.operations[0].filesTransferred < syncFiles) throw new Error("sync moved too few files");
          if (i === 0 && treeDigest(target) !== treeSha) throw new Error("synced tree differs from the source");
          fs.rmSync(target, { recursive: true, force: true });
        }
        at.providerSync = { in: { ...summarize(syncIn), calls: inCalls.total, byRoute: inCalls.byRoute }, out: { ...summarize(syncOut), calls: outCalls.total, byRoute: outCalls.byRoute } };

        // Side by side in this process, on the same sandbox and runner: base64 over exec vs file API.
        const sbx = await sdk.Sandbox.connect(lease.providerLeaseId, { apiKey: emu.credentials.apiKey, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 600_000 });
        const runner = withRemoteGroupKill(createStreamedProcessRunner({ api: envdProcessApi(sbx, { vendor: provider, requestTimeoutMs: 60_000 }) }));
        const files = envdFileTransport(sbx.files, { vendor: provider, upload: provider === "e2b" ? "stream" : "blob", requestTimeoutMs: 60_000, downloadTimeoutIsWholeBody: provider === "novita" });
        const opts = { roots: [ws] };
        const sideBySide = { base64: { in: [], out: [], inCalls: 0, outCalls: 0 }, fileApi: { in: [], out: [], inCalls: 0, outCalls: 0 } };
        for (let i = 0; i < syncRuns; i += 1) {
          for (const [kind, syncInFn, syncOutFn] of /** @type {["base64" | "fileApi", (ops: any) => Promise<unknown>, (ops: any) => Promise<unknown>][]} */ ([
            ["base64", (ops) => base64SyncIn(runner, ops, opts), (ops) => base64SyncOut(runner, ops, opts)],
            ["fileApi", (ops) => fileApiSyncIn(runner, files, ops, opts), (ops) => fileApiSyncOut(runner, files, ops, opts)],
          ])) {
            const row = sideBySide[kind];
            mark = emu.requests.mark();
            let s = process.hrtime.bigint();
            await syncInFn([{ operationId: `${kind}-in-${i}`, files: [{ sourcePath: tree, targetPath: `${ws}/${kind}-tree`, kind: "directory" }] }]);
            row.in.push(ms(s));
            row.inCalls = withoutKeepalive(await callsSince(emu, mark)).total;
            const target = path.join(scratch, `${kind}-out-${provider}-${latencyMs}-${i}`);
            mark = emu.requests.mark();
            s = process.hrtime.bigint();
            await syncOutFn([{ operationId: `${kind}-out-${i}`, files: [{ sourcePath: `${ws}/${kind}-tree`, targetPath: target, kind: "directory" }] }]);
            row.out.push(ms(s));
            row.outCalls = withoutKeepalive(await callsSince(emu, mark)).total;
            if (i === 0 && treeDigest(target) !== treeSha) throw new Error(`${kind} sync: the tree differs from the source`);
            fs.rmSync(target, { recursive: true, force: true });
          }
        }
        const sb = (row) => ({ in: { ...summarize(row.in), calls: row.inCalls }, out: { ...summarize(row.out), calls: row.outCalls } });
        at.syncSideBySide = { base64: sb(sideBySide.base64), fileApi: sb(sideBySide.fileApi) };
        at.syncSideBySide.speedup = {
          in: at.syncSideBySide.base64.in.median / at.syncSideBySide.fileApi.in.median,
          out: at.syncSideBySide.base64.out.median / at.syncSideBySide.fileApi.out.median,
        };
        await exec(lease, "rm", ["-rf", "--", `${ws}/tree`, `${ws}/base64-tree`, `${ws}/fileApi-tree`]);
        await release(lease);

        // Host-like task runs.
        const task = [];
        let taskCalls;
        for (let r = 0; r < taskRuns; r += 1) {
          mark = emu.requests.mark();
          const s = process.hrtime.bigint();
          await hostLikeRun({ acquire, release, exec, client, base, smallTars, latencyMs, r });
          task.push(ms(s));
          taskCalls = withoutKeepalive(await callsSince(emu, mark));
        }
        at.taskRun = { ...summarize(task), calls: taskCalls.total, byRoute: taskCalls.byRoute };
        console.log(
          `[bench] ${provider} @ ${latencyMs} ms: execute ${at.execute.median.toFixed(2)} ms (${at.execute.callsPerExecute} calls), sync in ${at.providerSync.in.median.toFixed(0)} ms / out ${at.providerSync.out.median.toFixed(0)} ms, base64/file-API ${at.syncSideBySide.speedup.in.toFixed(1)}x in ${at.syncSideBySide.speedup.out.toFixed(1)}x out, task run ${at.taskRun.median.toFixed(0)} ms (${at.taskRun.calls} calls)`,
        );
      }
    } finally {
      emu.faults.clear();
      for (const id of live) await client.env.destroyLease({ ...base, providerLeaseId: id }).catch(() => undefined);
      await client.shutdown();
    }
  }
} finally {
  // Calls the emulator did not serve (no route, UNIMPLEMENTED, refused): a missing route shows here.
  const unserved = emu.requests.unserved();
  console.log(`unserved calls: ${unserved.length ? unserved.map((u) => `${u.count}x ${u.method} ${u.target} (${u.reason})`).join(", ") : "none"}`);
  const left = await emu.leftovers();
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
  if (left.length) console.error(`[bench] leftovers: ${left.join(", ")}`);
}

/** One trivial run as the real host drives it (HOST-CALLS.md §1), with the agent's execute short. */
async function hostLikeRun({ acquire, release, exec, client, base, smallTars, latencyMs, r }) {
  const lease = await acquire({ runId: `task-${latencyMs}-${r}`, agentId: "bench" });
  await client.env.realizeWorkspace({ ...base, lease, workspace: { remotePath: lease.metadata.remoteCwd, mode: "shared_workspace" } });
  const ws = lease.metadata.remoteCwd;
  const rt = `${ws}/.paperclip-runtime`;
  // Preflight: context, PATH, 8 uploads by stdin, chmod, two `command -v`.
  await exec(lease, "sh", ["-c", "cat /etc/hosts >/dev/null; git rev-parse 2>/dev/null; true"]);
  await exec(lease, "sh", ["-c", 'printf "\\0%s\\0" "$PATH"']);
  const payload = Buffer.alloc(6 * 1024, 0x41).toString("base64");
  for (let i = 0; i < 8; i += 1) {
    await exec(lease, "sh", ["-c", `mkdir -p ${rt}/github && cat > ${rt}/github/f${i}.b64 && base64 -d < ${rt}/github/f${i}.b64 > ${rt}/github/f${i} && sha256sum ${rt}/github/f${i} >/dev/null`], {
      stdin: payload,
    });
  }
  await exec(lease, "sh", ["-c", `chmod 700 ${rt}/github/f0 && mkdir -p ${rt}/gh-config`]);
  await exec(lease, "sh", ["-c", "command -v sh"]);
  await exec(lease, "sh", ["-c", "command -v sh >/dev/null 2>&1"], { cwd: "/" });
  // Run start: four concurrent tar uploads, each with its post-upload extract.
  await Promise.all(
    smallTars.map((src, i) =>
      client.env.syncIn({
        ...base,
        lease,
        operations: [
          {
            operationId: `run-${i}`,
            files: [{ sourcePath: src, targetPath: `${rt}/claude/up-${i}`, kind: "directory" }],
          },
        ],
      }),
    ),
  );
  // Config, bridge upload by stdin, bridge start, readiness.
  await exec(lease, "sh", ["-c", `cp -R ${rt}/claude/up-0 ${rt}/claude/config`]);
  await exec(lease, "sh", ["-c", `mkdir -p ${rt}/bridge && cat > ${rt}/bridge/server.mjs`], { stdin: "x".repeat(30_000) });
  await exec(lease, "sh", ["-c", `mkdir -p ${rt}/q && nohup sh -c 'echo ready > ${rt}/q/ready.json; sleep 5' >/dev/null 2>&1 & echo $! > ${rt}/bridge.pid`]);
  await exec(lease, "sh", ["-c", `test -f ${rt}/q/ready.json`]);
  // The agent (stdin = prompt) while the host polls the file bridge.
  const agent = exec(lease, "sh", ["-c", "cat >/dev/null; sleep 1; echo done"], { stdin: "the prompt" });
  for (let i = 0; i < 30; i += 1) await exec(lease, "sh", ["-c", `ls ${rt}/q/ >/dev/null; tail -c +1 ${rt}/q/ready.json >/dev/null`]);
  await agent;
  await exec(lease, "sh", ["-c", `kill "$(cat ${rt}/bridge.pid)" 2>/dev/null; true`]);
  const back = path.join(scratch, `task-back-${latencyMs}-${r}`);
  await client.env.syncOut({ ...base, lease, operations: [{ operationId: "restore", files: [{ sourcePath: ws, targetPath: back, kind: "directory", exclude: [".paperclip-runtime"] }] }] });
  fs.rmSync(back, { recursive: true, force: true });
  await exec(lease, "rm", ["-rf", "--", `${rt}/github`]);
  await release(lease);
}

fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `envd-${report.date.replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
console.log(
  `\nenvd bench (node ${process.version}, ${os.cpus().length} cpus, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}); ${syncFiles} files / ${syncBytes / 1024 / 1024} MiB tree; host side in ${args.scratch}`,
);
for (const [provider, byLatency] of Object.entries(report.results)) {
  for (const [latency, r] of Object.entries(byLatency)) {
    console.log(`-- ${provider}, ${latency} per vendor call`);
    console.log(`  execute (true)          median ${r.execute.median.toFixed(2).padStart(8)} ms   ${r.execute.callsPerExecute} vendor calls each   (target 1)`);
    console.log(`  execute (1 KiB stdin)   median ${r.executeWithStdin.median.toFixed(2).padStart(8)} ms   ${r.executeWithStdin.callsPerExecute} vendor calls each`);
    console.log(`  syncIn  (provider)      median ${r.providerSync.in.median.toFixed(0).padStart(8)} ms   ${r.providerSync.in.calls} vendor calls   (target <= 2)`);
    console.log(`  syncOut (provider)      median ${r.providerSync.out.median.toFixed(0).padStart(8)} ms   ${r.providerSync.out.calls} vendor calls   (target <= 2)`);
    const s = r.syncSideBySide;
    console.log(
      `  side by side in: base64 ${s.base64.in.median.toFixed(0)} ms (${s.base64.in.calls} calls) vs file API ${s.fileApi.in.median.toFixed(0)} ms (${s.fileApi.in.calls} calls): ${s.speedup.in.toFixed(1)}x   (target >= 5x)`,
    );
    console.log(
      `  side by side out: base64 ${s.base64.out.median.toFixed(0)} ms (${s.base64.out.calls} calls) vs file API ${s.fileApi.out.median.toFixed(0)} ms (${s.fileApi.out.calls} calls): ${s.speedup.out.toFixed(1)}x   (target >= 5x)`,
    );
    console.log(`  host-like task run      median ${r.taskRun.median.toFixed(0).padStart(8)} ms   ${r.taskRun.calls} vendor calls`);
  }
}
console.log(`report: ${path.relative(repoRoot, file)}`);
