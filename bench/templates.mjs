#!/usr/bin/env node
// Custom images on bubblewrap: an acquire that starts from a captured template vs a plain acquire.
//   plain      environmentAcquireLease with the environment's config (an empty sandbox)
//   template   the same with the config bound to a template (`templateRef`), as the host applies it:
//              the kit checks the template is the caller's, bubblewrap copies its trees into the jail
//   capture    environmentCaptureTemplate of a setup sandbox holding the payload
//   copy       the copy alone: node's fs.cp of the template's trees to a scratch directory, as
//              restoreDisk (sandbox-backend) makes it, without a jail (the floor of a template start)
// Each sample is acquire -> the lease's answer (then the lease is destroyed, outside the timing).
// Plain and template samples alternate, so load on the machine hits both alike. The payload is
// --files files of --kib KiB each in the workspace, so the copy a template start needs is visible.
// Needs the built packages (`npx tsc -b providers/bubblewrap`). Target (issue #25): a template start
// is no slower than a plain acquire by more than the copy it needs.
//
//   node bench/templates.mjs [--runs 30] [--files 200] [--kib 64] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cp, rm } from "node:fs/promises";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { round, summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "30" },
    files: { type: "string", default: "200" },
    kib: { type: "string", default: "64" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const files = Number(args.files);
const kib = Number(args.kib);
if (!(runs >= 5)) throw new Error("--runs must be at least 5");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-bench-tpl-"));
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/bubblewrap"));
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir() } });
const config = { stateDir, timeoutMs: 120_000 };
const base = { driverKey: "bubblewrap", companyId: "bench", environmentId: "bench", issueId: null, config };
const CALL = { timeoutMs: 300_000 };

async function timedAcquire(withConfig) {
  const start = process.hrtime.bigint();
  const lease = await client.env.acquireLease({ ...base, config: withConfig, runId: `bench-${randomUUID()}` });
  const took = ms(start);
  await client.env.destroyLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  return took;
}

let templateRef;
const results = { payload: { files, kib, bytes: files * kib * 1024 } };
try {
  const session = /** @type {{ providerLeaseId: string, metadata: Record<string, unknown> }} */ (
    await client.call("environmentStartInteractiveSetup", { ...base, sessionId: randomUUID(), connectionExpiresInMinutes: 15, expiresAt: new Date(Date.now() + 3_600_000).toISOString() }, CALL)
  );
  const lease = { providerLeaseId: session.providerLeaseId, metadata: session.metadata };
  const fill = `i=0; while [ $i -lt ${files} ]; do head -c ${kib * 1024} /dev/urandom > f$i.bin; i=$((i+1)); done`;
  const filled = await client.env.execute({ ...base, lease, command: "sh", args: ["-c", fill], timeoutMs: 300_000 });
  if (filled.exitCode !== 0) throw new Error(`filling the setup sandbox failed: ${filled.stderr}`);
  const captureStart = process.hrtime.bigint();
  ({ templateRef } = /** @type {{ templateRef: string }} */ (
    await client.call("environmentCaptureTemplate", { ...base, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, templateLabel: "bench" }, CALL)
  ));
  results.captureMs = round(ms(captureStart));
  await client.call("environmentCancelInteractiveSetup", { ...base, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" }, CALL);

  const bound = { ...config, templateRef };
  await timedAcquire(config); // warm-up: the worker's first jail
  await timedAcquire(bound);
  const plain = [];
  const fromTemplate = [];
  const copyOnly = [];
  const disk = path.join(stateDir, "templates", templateRef, "disk");
  for (let i = 0; i < runs; i += 1) {
    plain.push(await timedAcquire(config));
    fromTemplate.push(await timedAcquire(bound));
    const scratch = path.join(stateDir, `copy-${i}`);
    const start = process.hrtime.bigint();
    await cp(disk, scratch, { recursive: true, force: true, verbatimSymlinks: true, preserveTimestamps: true });
    copyOnly.push(ms(start));
    await rm(scratch, { recursive: true, force: true });
  }
  results.copyOnlyMs = summarize(copyOnly);
  results.plainAcquireMs = summarize(plain);
  results.templateAcquireMs = summarize(fromTemplate);
  results.ratioTemplateVsPlain = round(results.templateAcquireMs.median / results.plainAcquireMs.median);
  results.templateOverheadMedianMs = round(results.templateAcquireMs.median - results.plainAcquireMs.median);
  results.overheadVsCopyRatio = round(results.templateOverheadMedianMs / results.copyOnlyMs.median);
} finally {
  if (templateRef) await client.call("environmentDeleteTemplate", { ...base, templateRef }, CALL).catch(() => undefined);
  await client.shutdown();
  fs.rmSync(stateDir, { recursive: true, force: true });
}

const fmt = (n) => n.toFixed(1);
console.log(`bubblewrap acquire, ${runs} runs each, payload ${files} x ${kib} KiB (ms)   median     p95     min     max`);
for (const [name, s] of [
  ["plain acquire", results.plainAcquireMs],
  ["acquire from template", results.templateAcquireMs],
  ["the copy alone (fs.cp, no jail)", results.copyOnlyMs],
]) {
  console.log(`${name.padEnd(52)} ${fmt(s.median).padStart(7)} ${fmt(s.p95).padStart(7)} ${fmt(s.min).padStart(7)} ${fmt(s.max).padStart(7)}`);
}
console.log(
  `template / plain (medians): ${results.ratioTemplateVsPlain}  (+${results.templateOverheadMedianMs} ms, ${results.overheadVsCopyRatio} x the copy alone); capture of the setup sandbox: ${results.captureMs} ms`,
);
fs.mkdirSync(args.out, { recursive: true });
fs.writeFileSync(path.join(args.out, "templates.json"), `${JSON.stringify({ at: new Date().toISOString(), runs, ...results }, null, 2)}\n`);
