#!/usr/bin/env node
// Bridge requests and time of the cloudflare provider against its bridge Worker running in workerd
// (emulators/cloudflare: the real Worker and @cloudflare/sandbox 0.7.21, the container a jail),
// through the provider's built worker (forked as the host forks it):
//   execute   a plain `true` on a warm lease (target: 1 bridge request), and one with 1 KiB of stdin
//   sync      syncIn / syncOut of a tree of --sync-files files, --sync-mib MiB in all, through the
//             provider (the bridge's file routes: the kit's file-API tar sync); next to it, side by
//             side on the same sandbox and the same bridge, what a bridge without the file routes
//             gets: the kit's base64 sync over `POST /exec` (the upstream-template runner, 3 MiB of
//             base64 per call through the exec's stdin field), and the same file-API sync, both in
//             this process (target: file API >= 5x faster); and, on a smaller tree (--inline-files,
//             --inline-mib), the kit's base64 sync with every chunk inside the command (36 KiB per
//             call: what an exec without a usable stdin field leaves) against the file routes
// Bridge requests are the emulator front's recorded requests under /api/paperclip-sandbox/v1;
// container calls (the Durable Object to the stand-in container) are counted beside them. Needs
// `npm run build`.
//
//   node bench/cloudflare.mjs [--runs 100] [--sync-runs 3] [--sync-files 10000] [--sync-mib 100]
//                             [--out bench/results] [--scratch DIR]   (host side: tree, targets, worker TMPDIR)
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/cloudflare/dist/index.js";
import { base64ChunkFor, base64SyncIn, base64SyncOut, fileApiSyncIn, fileApiSyncOut } from "../packages/kit/dist/index.js";
import { BridgeClient } from "../providers/cloudflare/dist/bridge-client.js";
import { cloudflareConfig } from "../providers/cloudflare/dist/config.js";
import { bridgeFiles, bridgeProcessRunner, legacyBridgeRunner } from "../providers/cloudflare/dist/runner.js";
import { SessionPool } from "../providers/cloudflare/dist/sessions.js";
import { makeTree, treeDigest } from "./lib/tree.mjs";
import { summarize } from "./lib/stats.mjs";

/** @typedef {[kind: string, syncIn: (ops: any) => Promise<unknown>, syncOut: (ops: any) => Promise<unknown>]} SyncPair */

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    "sync-runs": { type: "string", default: "3" },
    "sync-files": { type: "string", default: "10000" },
    "sync-mib": { type: "string", default: "100" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
    scratch: { type: "string", default: os.tmpdir() },
    "inline-files": { type: "string", default: "1000" },
    "inline-mib": { type: "string", default: "10" },
  },
});
const runs = Number(args.runs);
const syncRuns = Number(args["sync-runs"]);
if (!(runs >= 1 && syncRuns >= 1)) throw new Error("--runs and --sync-runs must be at least 1");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const BRIDGE = "/api/paperclip-sandbox/v1";
/** Bridge requests (the front) and container calls (the stand-in) since `mark`, with the bridge's by route. */
async function callsSince(emu, mark) {
  await emu.requests.idle(30_000);
  const records = emu.requests.list({ since: mark });
  const bridge = records.filter((r) => r.path.startsWith(BRIDGE));
  const byRoute = {};
  for (const r of bridge) byRoute[`${r.method} ${r.route}`] = (byRoute[`${r.method} ${r.route}`] ?? 0) + 1;
  return { bridge: bridge.length, container: records.filter((r) => r.path.startsWith("/c/")).length, byRoute };
}

const scratch = fs.mkdtempSync(path.join(args.scratch, "cloudflare-bench-"));
const syncFiles = Number(args["sync-files"]);
const syncBytes = Number(args["sync-mib"]) * 1024 * 1024;
const tree = path.join(scratch, "tree");
makeTree(tree, syncFiles, syncBytes);
const treeSha = treeDigest(tree);
const smallTree = path.join(scratch, "small-tree");
makeTree(smallTree, Number(args["inline-files"]), Number(args["inline-mib"]) * 1024 * 1024);
const smallSha = treeDigest(smallTree);

const report = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: os.cpus().length,
  loadavg: os.loadavg(),
  scratch: args.scratch,
  runs,
  syncRuns,
  syncFiles,
  syncMiB: syncBytes / 1024 / 1024,
  results: {},
};
const emu = await runEmulator(emulator, {});
for (const name of ["SIGINT", "SIGTERM"]) {
  process.once(name, () => {
    void emu.close().finally(() => {
      fs.rmSync(scratch, { recursive: true, force: true });
      process.exit(130);
    });
  });
}
const client = await startWorker(await loadPluginPackage(path.join(repoRoot, "providers/cloudflare")), { env: { TMPDIR: args.scratch } });
const config = { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token, timeoutMs: 600_000 };
const base = { driverKey: "cloudflare", companyId: "bench", environmentId: "bench", config };
let lease;
try {
  lease = await client.env.acquireLease({ ...base, runId: `bench-${Date.now()}`, agentId: "bench" });
  const ws = /** @type {string} */ (lease.metadata.remoteCwd);
  const exec = (command, argv = [], extra = {}) => client.env.execute({ ...base, lease, command, args: argv, cwd: ws, timeoutMs: 60_000, ...extra });
  for (let i = 0; i < 3; i += 1) await exec("true"); // warm-up (the health answer is fetched once per worker)

  const plain = [];
  let mark = emu.requests.mark();
  for (let i = 0; i < runs; i += 1) {
    const s = process.hrtime.bigint();
    const r = await exec("true");
    plain.push(ms(s));
    if (r.exitCode !== 0) throw new Error(`execute failed: ${JSON.stringify(r)}`);
  }
  let calls = await callsSince(emu, mark);
  console.error(`[bench] ${runs} executes done`);
  report.results.execute = { ...summarize(plain), bridgePerExecute: calls.bridge / runs, containerPerExecute: calls.container / runs, byRoute: calls.byRoute };

  const withStdin = [];
  const stdin = "x".repeat(1024);
  const stdinRuns = Math.max(1, Math.floor(runs / 2));
  mark = emu.requests.mark();
  for (let i = 0; i < stdinRuns; i += 1) {
    const s = process.hrtime.bigint();
    const r = await exec("wc", ["-c"], { stdin });
    withStdin.push(ms(s));
    if (r.stdout.trim() !== "1024") throw new Error(`stdin execute: ${JSON.stringify(r)}`);
  }
  calls = await callsSince(emu, mark);
  report.results.executeWithStdin = { ...summarize(withStdin), bridgePerExecute: calls.bridge / stdinRuns, containerPerExecute: calls.container / stdinRuns, byRoute: calls.byRoute };

  // Sync through the provider (the bridge's file routes), each direction checked byte for byte.
  const syncIn = [];
  const syncOut = [];
  let inCalls;
  let outCalls;
  for (let i = 0; i < syncRuns; i += 1) {
    mark = emu.requests.mark();
    let s = process.hrtime.bigint();
    const sin = await client.env.syncIn(
      { ...base, lease, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: tree, targetPath: `${ws}/tree`, kind: "directory" }] }] },
      { timeoutMs: 1_800_000 },
    );
    syncIn.push(ms(s));
    inCalls = await callsSince(emu, mark);
    const target = path.join(scratch, `out-${i}`);
    mark = emu.requests.mark();
    s = process.hrtime.bigint();
    const sout = await client.env.syncOut(
      { ...base, lease, operations: [{ operationId: `out-${i}`, files: [{ sourcePath: `${ws}/tree`, targetPath: target, kind: "directory" }] }] },
      { timeoutMs: 1_800_000 },
    );
    syncOut.push(ms(s));
    outCalls = await callsSince(emu, mark);
    console.error(`[bench] provider sync ${i + 1}/${syncRuns}: in ${syncIn.at(-1).toFixed(0)} ms, out ${syncOut.at(-1).toFixed(0)} ms`);
    if (sin.operations[0].filesTransferred < syncFiles || sout.operations[0].filesTransferred < syncFiles) throw new Error("sync moved too few files");
    if (i === 0 && treeDigest(target) !== treeSha) throw new Error("synced tree differs from the source");
    fs.rmSync(target, { recursive: true, force: true });
  }
  report.results.providerSync = {
    in: { ...summarize(syncIn), bridge: inCalls.bridge, container: inCalls.container, byRoute: inCalls.byRoute },
    out: { ...summarize(syncOut), bridge: outCalls.bridge, container: outCalls.container, byRoute: outCalls.byRoute },
  };

  // Side by side in this process, on the same sandbox through the same bridge: what a bridge without
  // the file routes gets (base64 over POST /exec) vs the file routes.
  const bridge = new BridgeClient(cloudflareConfig.parse(config));
  const target = { providerLeaseId: lease.providerLeaseId, sessionStrategy: /** @type {const} */ ("named"), sessions: new SessionPool("bench") };
  const legacy = legacyBridgeRunner(bridge, target);
  const streamed = bridgeProcessRunner(bridge, target);
  const files = bridgeFiles(bridge, lease.providerLeaseId);
  const opts = { roots: [ws] };
  /** @type {Record<string, any>} */
  const rows = { base64: { in: [], out: [] }, fileApi: { in: [], out: [] } };
  for (let i = 0; i < syncRuns; i += 1) {
    for (const [kind, syncInFn, syncOutFn] of /** @type {SyncPair[]} */ ([
      ["base64", (ops) => base64SyncIn(legacy, ops, opts), (ops) => base64SyncOut(legacy, ops, opts)],
      ["fileApi", (ops) => fileApiSyncIn(streamed, files, ops, opts), (ops) => fileApiSyncOut(streamed, files, ops, opts)],
    ])) {
      const row = rows[kind];
      mark = emu.requests.mark();
      let s = process.hrtime.bigint();
      await syncInFn([{ operationId: `${kind}-in-${i}`, files: [{ sourcePath: tree, targetPath: `${ws}/${kind}-tree`, kind: "directory" }] }]);
      row.in.push(ms(s));
      row.inCalls = await callsSince(emu, mark);
      const out = path.join(scratch, `${kind}-out-${i}`);
      mark = emu.requests.mark();
      s = process.hrtime.bigint();
      await syncOutFn([{ operationId: `${kind}-out-${i}`, files: [{ sourcePath: `${ws}/${kind}-tree`, targetPath: out, kind: "directory" }] }]);
      row.out.push(ms(s));
      row.outCalls = await callsSince(emu, mark);
      console.error(`[bench] ${kind} sync ${i + 1}/${syncRuns}: in ${row.in.at(-1).toFixed(0)} ms, out ${row.out.at(-1).toFixed(0)} ms`);
      if (i === 0 && treeDigest(out) !== treeSha) throw new Error(`${kind} sync: the tree differs from the source`);
      fs.rmSync(out, { recursive: true, force: true });
    }
  }
  const sb = (row) => ({
    in: { ...summarize(row.in), bridge: row.inCalls.bridge, container: row.inCalls.container },
    out: { ...summarize(row.out), bridge: row.outCalls.bridge, container: row.outCalls.container },
  });
  const [b64, fileApi] = [sb(rows.base64), sb(rows.fileApi)];
  report.results.syncSideBySide = { base64: b64, fileApi, speedup: { in: b64.in.median / fileApi.in.median, out: b64.out.median / fileApi.out.median } };

  // The small tree, side by side: base64 with every chunk inside the command vs the file routes (one run each).
  const inline = legacyBridgeRunner(bridge, target, { stdinField: false });
  const small = {};
  for (const [kind, syncInFn, syncOutFn] of /** @type {SyncPair[]} */ ([
    ["base64Inline", (ops) => base64SyncIn(inline, ops, { ...opts, chunkBytes: base64ChunkFor(inline) }), (ops) => base64SyncOut(inline, ops, { ...opts, chunkBytes: base64ChunkFor(inline) })],
    ["fileApi", (ops) => fileApiSyncIn(streamed, files, ops, opts), (ops) => fileApiSyncOut(streamed, files, ops, opts)],
  ])) {
    mark = emu.requests.mark();
    let s = process.hrtime.bigint();
    await syncInFn([{ operationId: `${kind}-small-in`, files: [{ sourcePath: smallTree, targetPath: `${ws}/${kind}-small`, kind: "directory" }] }]);
    const inMs = ms(s);
    const inCalls = await callsSince(emu, mark);
    const out = path.join(scratch, `${kind}-small-out`);
    mark = emu.requests.mark();
    s = process.hrtime.bigint();
    await syncOutFn([{ operationId: `${kind}-small-out`, files: [{ sourcePath: `${ws}/${kind}-small`, targetPath: out, kind: "directory" }] }]);
    const outMs = ms(s);
    const outCalls = await callsSince(emu, mark);
    if (treeDigest(out) !== smallSha) throw new Error(`${kind} small sync: the tree differs from the source`);
    fs.rmSync(out, { recursive: true, force: true });
    small[kind] = { in: { ms: inMs, bridge: inCalls.bridge }, out: { ms: outMs, bridge: outCalls.bridge } };
    console.error(`[bench] ${kind} small sync: in ${inMs.toFixed(0)} ms, out ${outMs.toFixed(0)} ms`);
  }
  small.speedup = { in: small.base64Inline.in.ms / small.fileApi.in.ms, out: small.base64Inline.out.ms / small.fileApi.out.ms };
  report.results.smallTreeInline = { files: Number(args["inline-files"]), mib: Number(args["inline-mib"]), ...small };

  // For reference: a plain execute over upstream's JSON exec (the template's runner) in this process.
  const jsonExec = [];
  mark = emu.requests.mark();
  for (let i = 0; i < runs; i += 1) {
    const s = process.hrtime.bigint();
    await legacy.run("true", {});
    jsonExec.push(ms(s));
  }
  calls = await callsSince(emu, mark);
  report.results.templateExecute = { ...summarize(jsonExec), bridgePerExecute: calls.bridge / runs, containerPerExecute: calls.container / runs };
  // A lease's own cost: acquire (the health answer is cached per worker) and release, each counted.
  const leaseRuns = Math.max(1, Math.min(runs, 10));
  const acquires = [];
  const releases = [];
  let acquireCalls = { bridge: 0, container: 0, byRoute: {} };
  let releaseCalls = { bridge: 0, container: 0, byRoute: {} };
  const add = (into, c) => {
    into.bridge += c.bridge;
    into.container += c.container;
    for (const [route, n] of Object.entries(c.byRoute)) into.byRoute[route] = (into.byRoute[route] ?? 0) + n;
  };
  for (let i = 0; i < leaseRuns; i += 1) {
    mark = emu.requests.mark();
    let s = process.hrtime.bigint();
    const other = await client.env.acquireLease({ ...base, runId: `bench-lease-${Date.now()}-${i}`, agentId: "bench" });
    acquires.push(ms(s));
    add(acquireCalls, await callsSince(emu, mark));
    mark = emu.requests.mark();
    s = process.hrtime.bigint();
    await client.env.releaseLease({ ...base, providerLeaseId: other.providerLeaseId, leaseMetadata: other.metadata });
    releases.push(ms(s));
    add(releaseCalls, await callsSince(emu, mark));
  }
  const perLease = (c) => ({ bridge: c.bridge / leaseRuns, container: c.container / leaseRuns, byRoute: Object.fromEntries(Object.entries(c.byRoute).map(([k, n]) => [k, n / leaseRuns])) });
  report.results.lease = { acquire: { ...summarize(acquires), ...perLease(acquireCalls) }, release: { ...summarize(releases), ...perLease(releaseCalls) } };
  console.error(`[bench] ${leaseRuns} acquire/release cycles done`);

  await exec("rm", ["-rf", "--", `${ws}/tree`, `${ws}/base64-tree`, `${ws}/fileApi-tree`, `${ws}/base64Inline-small`, `${ws}/fileApi-small`]);
  const unserved = emu.requests.unserved();
  console.log(`unserved calls: ${unserved.length ? unserved.map((u) => `${u.count}x ${u.method} ${u.target} (${u.reason})`).join(", ") : "none"}`);
} finally {
  if (lease) await client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }).catch(() => undefined);
  await client.shutdown();
  const left = await emu.leftovers();
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
  if (left.length) console.error(`[bench] leftovers: ${left.join(", ")}`);
}

fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `cloudflare-${report.date.replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
const r = report.results;
const f0 = (n) => n.toFixed(0);
console.log(
  `\ncloudflare bench (node ${process.version}, ${os.cpus().length} cpus, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}); ${syncFiles} files / ${syncBytes / 1024 / 1024} MiB tree; host side in ${args.scratch}`,
);
console.log(
  `  execute (true)          median ${r.execute.median.toFixed(1).padStart(7)} ms   ${r.execute.bridgePerExecute} bridge requests each (target 1), ${r.execute.containerPerExecute} container calls`,
);
console.log(
  `  execute (1 KiB stdin)   median ${r.executeWithStdin.median.toFixed(1).padStart(7)} ms   ${r.executeWithStdin.bridgePerExecute} bridge requests each, ${r.executeWithStdin.containerPerExecute} container calls`,
);
console.log(`  execute over the template's JSON exec (reference) median ${r.templateExecute.median.toFixed(1)} ms, ${r.templateExecute.bridgePerExecute} bridge requests each`);
console.log(
  `  acquire                 median ${f0(r.lease.acquire.median).padStart(7)} ms   ${r.lease.acquire.bridge} bridge requests each (${Object.entries(r.lease.acquire.byRoute)
    .map(([k, n]) => `${n}x ${k}`)
    .join(", ")}), ${r.lease.acquire.container} container calls`,
);
console.log(
  `  release                 median ${f0(r.lease.release.median).padStart(7)} ms   ${r.lease.release.bridge} bridge requests each (${Object.entries(r.lease.release.byRoute)
    .map(([k, n]) => `${n}x ${k}`)
    .join(", ")}), ${r.lease.release.container} container calls`,
);
console.log(`  syncIn  (provider)      median ${f0(r.providerSync.in.median).padStart(7)} ms   ${r.providerSync.in.bridge} bridge requests, ${r.providerSync.in.container} container calls`);
console.log(`  syncOut (provider)      median ${f0(r.providerSync.out.median).padStart(7)} ms   ${r.providerSync.out.bridge} bridge requests, ${r.providerSync.out.container} container calls`);
const s = r.syncSideBySide;
console.log(
  `  side by side in:  base64 over exec ${f0(s.base64.in.median)} ms (${s.base64.in.bridge} bridge requests) vs file routes ${f0(s.fileApi.in.median)} ms (${s.fileApi.in.bridge}): ${s.speedup.in.toFixed(1)}x (target >= 5x)`,
);
console.log(
  `  side by side out: base64 over exec ${f0(s.base64.out.median)} ms (${s.base64.out.bridge} bridge requests) vs file routes ${f0(s.fileApi.out.median)} ms (${s.fileApi.out.bridge}): ${s.speedup.out.toFixed(1)}x (target >= 5x)`,
);
const t = r.smallTreeInline;
console.log(
  `  small tree (${t.files} files / ${t.mib} MiB), base64 inside the command (36 KiB per call) vs file routes: in ${f0(t.base64Inline.in.ms)} ms (${t.base64Inline.in.bridge} requests) vs ${f0(t.fileApi.in.ms)} ms: ${t.speedup.in.toFixed(1)}x; out ${f0(t.base64Inline.out.ms)} ms (${t.base64Inline.out.bridge}) vs ${f0(t.fileApi.out.ms)} ms: ${t.speedup.out.toFixed(1)}x`,
);
console.log(`report: ${path.relative(repoRoot, file)}`);
