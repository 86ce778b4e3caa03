#!/usr/bin/env node
// Custom images on modal, in process against the Modal emulator (real `modal` SDK on loopback):
//   plain      environmentAcquireLease with a registry image (node:22)
//   template   the same with Image bound to a captured template, as the host binds it: the kit's
//              owner check (ImageGetByTag), the create's look-up of the name, the create from the
//              snapshot image (the emulator copies its trees into the jail)
//   capture    environmentCaptureTemplate of a setup sandbox holding the payload
// Each sample is acquire -> the lease (then it is destroyed, outside the timing). Plain and template
// samples alternate, so load on the machine hits both alike. Every figure comes with the gRPC calls
// the emulator's recorder saw (median per operation; the command channel's exec not counted). Needs
// the built packages (`npm run build`).
//
//   node bench/modal-templates.mjs [--runs 5] [--files 50] [--kib 64]
import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/modal/dist/index.js";
import { createModalPlugin } from "../providers/modal/dist/plugin.js";
import { round, summarize } from "./lib/stats.mjs";

const { values: args } = parseArgs({ options: { runs: { type: "string", default: "5" }, files: { type: "string", default: "50" }, kib: { type: "string", default: "64" } } });
const runs = Number(args.runs);
const files = Number(args.files);
const kib = Number(args.kib);
if (!(runs >= 5)) throw new Error("--runs must be at least 5");

const emu = await runEmulator(emulator, {});
const modal = createModalPlugin({ env: {} });
const hooks = modal.provider.plugin.definition;
// Only the logger and the execution log are read by the provider in process.
const context = /** @type {import("@paperclipai/plugin-sdk").PluginContext} */ (
  /** @type {unknown} */ ({ execution: { log: () => undefined }, logger: { info() {}, warn() {}, error() {}, debug() {} } })
);
await hooks.setup(context);
const config = { tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "bench-templates", execTimeoutMs: 120_000 };
const scope = { driverKey: "modal", companyId: "bench", environmentId: "bench", issueId: null };
const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;

/** gRPC calls since `mark` by method, without the exec family (commands and the command channel). */
const callsSince = (mark) =>
  emu.requests
    .list({ since: mark, includeRunning: true })
    .map((r) => r.path.split("/").pop())
    .filter((name) => !name.startsWith("TaskExec"));

async function timedAcquire(withConfig) {
  const mark = emu.requests.mark();
  const start = process.hrtime.bigint();
  const lease = await hooks.onEnvironmentAcquireLease({ ...scope, config: withConfig, runId: `bench-${randomUUID()}` });
  const took = ms(start);
  const calls = callsSince(mark);
  await hooks.onEnvironmentDestroyLease({ ...scope, config: withConfig, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  return { took, calls };
}

let templateRef;
const results = { payload: { files, kib } };
try {
  const session = await hooks.onEnvironmentStartInteractiveSetup({ ...scope, config, sessionId: randomUUID(), expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
  const lease = { providerLeaseId: session.providerLeaseId, metadata: session.metadata };
  const fill = `i=0; while [ $i -lt ${files} ]; do head -c ${kib * 1024} /dev/urandom > f$i.bin; i=$((i+1)); done`;
  const filled = await hooks.onEnvironmentExecute({ ...scope, config, lease, command: "sh", args: ["-c", fill], timeoutMs: 300_000 });
  if (filled.exitCode !== 0) throw new Error(`filling the setup sandbox failed: ${filled.stderr}`);
  const mark = emu.requests.mark();
  const captureStart = process.hrtime.bigint();
  ({ templateRef } = await hooks.onEnvironmentCaptureTemplate({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata }));
  results.captureMs = round(ms(captureStart));
  results.captureCalls = callsSince(mark);
  await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" });

  const bound = { ...config, image: templateRef };
  await timedAcquire(config); // warm-up: the worker's client, app and registry image
  await timedAcquire(bound);
  const plain = [];
  const fromTemplate = [];
  for (let i = 0; i < runs; i += 1) {
    plain.push(await timedAcquire(config));
    fromTemplate.push(await timedAcquire(bound));
  }
  results.plainAcquireMs = summarize(plain.map((s) => s.took));
  results.templateAcquireMs = summarize(fromTemplate.map((s) => s.took));
  results.plainCalls = plain.at(-1).calls;
  results.templateCalls = fromTemplate.at(-1).calls;
  results.ratioTemplateVsPlain = round(results.templateAcquireMs.median / results.plainAcquireMs.median);
  const deleteMark = emu.requests.mark();
  await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef, reason: "disabled" });
  results.deleteCalls = callsSince(deleteMark);
  templateRef = undefined;
} finally {
  if (templateRef) await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef, reason: "disabled" }).catch(() => undefined);
  modal.accounts.closeAll();
  await emu.close();
}

const fmt = (n) => n.toFixed(1);
console.log(`modal acquire (emulator, in process), ${runs} runs each, payload ${files} x ${kib} KiB (ms)   median     min     max`);
for (const [name, s] of [
  ["plain acquire (registry image)", results.plainAcquireMs],
  ["acquire from template", results.templateAcquireMs],
]) {
  console.log(`${name.padEnd(70)} ${fmt(s.median).padStart(7)} ${fmt(s.min).padStart(7)} ${fmt(s.max).padStart(7)}`);
}
console.log(`template / plain (medians): ${results.ratioTemplateVsPlain}; capture: ${results.captureMs} ms`);
console.log(
  `gRPC calls: capture ${results.captureCalls.join(", ")}; plain acquire ${results.plainCalls.join(", ")}; from template ${results.templateCalls.join(", ")}; delete ${results.deleteCalls.join(", ")}`,
);
