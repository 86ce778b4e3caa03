#!/usr/bin/env node
// Benchmarks of the sandbox backend itself (no worker, no JSON-RPC), as an emulator drives it:
//   cold        create -> first byte of a runner command's output (`sandbox.runner.run`), per fresh sandbox
//   cold-exec   create -> first byte of an exec handle's output (subscription from offset 0)
//   destroy     destroy with confirmation (no process, cgroup or directory left)
//   freeze      freeze / thaw of a sandbox with a running counter, by the cgroup freezer (when this
//               worker may create cgroups) and by signals
//   runner      steady `true` round trip through the runner, interleaved with a bare `sh -c true` spawn
//   exec        steady `true` round trip through an exec handle (start -> exited), same interleaving
//   extendTtl   moving the expiry (deadline file + keeper wake-up + record)
// Next to bubblewrap's figures through the worker client (bench/README.md): cold acquire -> first
// output 104 ms, execute round trip 1.75-1.9x a bare spawn. Needs the built package
// (`npx tsc -b packages/sandbox-backend`). Medians over --runs (>= 100).
//
//   node bench/sandbox-backend.mjs [--runs 100] [--out bench/results]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createSandboxBackend } from "../packages/sandbox-backend/dist/index.js";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
if (!(runs >= 100)) throw new Error("--runs must be at least 100");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
function bareSpawn() {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", "true"], { stdio: "ignore" });
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
  });
}
/** Runs a and b `runs` times each, interleaved and alternating which goes first. */
async function interleaved(a, b) {
  const samplesA = [];
  const samplesB = [];
  for (let i = 0; i < runs; i += 1) {
    const timeA = async () => {
      const s = process.hrtime.bigint();
      await a();
      samplesA.push(ms(s));
    };
    const timeB = async () => {
      const s = process.hrtime.bigint();
      await b();
      samplesB.push(ms(s));
    };
    if (i % 2 === 0) {
      await timeA();
      await timeB();
    } else {
      await timeB();
      await timeA();
    }
  }
  return [summarize(samplesA), summarize(samplesB)];
}

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-bench-"));
const backend = createSandboxBackend({ stateDir });
const signalBackend = createSandboxBackend({ stateDir, freezer: "signal" });
const results = {};
const COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; sleep 0.01; done";

async function createToRunnerOutput() {
  const started = process.hrtime.bigint();
  const sandbox = await backend.create({ ttlMs: 120_000 });
  const created = ms(started);
  let first = null;
  await sandbox.runner.run("echo ready", { stdout: () => (first ??= ms(started)) });
  return { sandbox, created, first: first ?? ms(started) };
}

async function createToExecOutput() {
  const started = process.hrtime.bigint();
  const sandbox = await backend.create({ ttlMs: 120_000 });
  const handle = await sandbox.exec({ argv: ["echo", "ready"] });
  let first = null;
  await handle.subscribe({ stdout: 0 }, { onData: () => (first ??= ms(started)) }).done;
  return { sandbox, first: first ?? ms(started) };
}

async function freezeThaw(target, label) {
  const sandbox = await target.create({ ttlMs: 600_000 });
  await sandbox.exec({ script: COUNTER, detached: true });
  const freeze = [];
  const thaw = [];
  for (let i = 0; i < runs; i += 1) {
    let s = process.hrtime.bigint();
    await sandbox.freeze();
    freeze.push(ms(s));
    s = process.hrtime.bigint();
    await sandbox.thaw();
    thaw.push(ms(s));
  }
  const method = JSON.parse(fs.readFileSync(path.join(sandbox.paths.dir, "sandbox.json"), "utf8")).freezer && label === "auto" ? "cgroup" : "signal";
  await target.destroy(sandbox.id);
  return { method, freeze: summarize(freeze), thaw: summarize(thaw) };
}

try {
  // Warm-up: page cache, JIT, one jail of each kind.
  for (let i = 0; i < 5; i += 1) {
    await backend.destroy((await createToRunnerOutput()).sandbox.id);
    await backend.destroy((await createToExecOutput()).sandbox.id);
  }

  const cold = [];
  const createCall = [];
  const destroy = [];
  for (let i = 0; i < runs; i += 1) {
    const { sandbox, created, first } = await createToRunnerOutput();
    cold.push(first);
    createCall.push(created);
    const s = process.hrtime.bigint();
    await backend.destroy(sandbox.id);
    destroy.push(ms(s));
  }
  results.createToFirstRunnerOutput = summarize(cold);
  results.createCallOnly = summarize(createCall);
  results.destroyConfirmed = summarize(destroy);

  const coldExec = [];
  for (let i = 0; i < runs; i += 1) {
    const { sandbox, first } = await createToExecOutput();
    coldExec.push(first);
    await backend.destroy(sandbox.id);
  }
  results.createToFirstExecOutput = summarize(coldExec);

  results.freezeThaw = [await freezeThaw(backend, "auto"), await freezeThaw(signalBackend, "signal")];

  const sandbox = await backend.create({ ttlMs: 600_000 });
  for (let i = 0; i < 10; i += 1) await sandbox.runner.run("true", {});
  [results.steadyRunner, results.bareSpawnA] = await interleaved(() => sandbox.runner.run("true", {}), bareSpawn);
  results.runnerOverBare = results.steadyRunner.median / results.bareSpawnA.median;
  const execTrue = async () => {
    const handle = await sandbox.exec({ argv: ["true"] });
    await handle.exited;
    await sandbox.reap(handle.pid);
  };
  for (let i = 0; i < 10; i += 1) await execTrue();
  [results.steadyExec, results.bareSpawnB] = await interleaved(execTrue, bareSpawn);
  results.execOverBare = results.steadyExec.median / results.bareSpawnB.median;

  const extend = [];
  for (let i = 0; i < runs; i += 1) {
    const s = process.hrtime.bigint();
    await sandbox.extendTtl(Date.now() + 600_000 + i);
    extend.push(ms(s));
  }
  results.extendTtl = summarize(extend);
  await backend.destroy(sandbox.id);
} finally {
  for (const leftover of await backend.list()) await backend.destroy(leftover.id).catch(() => undefined);
  await backend.close();
  await signalBackend.close();
  fs.rmSync(stateDir, { recursive: true, force: true });
}

const report = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), uid: process.getuid(), runs, results };
const [auto, bySignal] = results.freezeThaw;
const rows = [
  ["create -> first runner output", results.createToFirstRunnerOutput.median, "< 100 ms (bubblewrap acquire -> first output: 104 ms)"],
  ["create -> first exec output", results.createToFirstExecOutput.median, "< 100 ms"],
  ["create call only", results.createCallOnly.median, ""],
  ["destroy, confirmed", results.destroyConfirmed.median, "(bubblewrap release with receipt: 15 ms)"],
  [`freeze (${auto.method})`, auto.freeze.median, ""],
  [`thaw (${auto.method})`, auto.thaw.median, "< 20 ms"],
  [`freeze (${bySignal.method})`, bySignal.freeze.median, ""],
  [`thaw (${bySignal.method})`, bySignal.thaw.median, "< 20 ms"],
  ["steady runner `true`", results.steadyRunner.median, `ratio ${results.runnerOverBare.toFixed(2)}x bare (bubblewrap execute: 1.75-1.9x)`],
  ["steady exec handle `true`", results.steadyExec.median, `ratio ${results.execOverBare.toFixed(2)}x bare`],
  ["bare sh -c true", results.bareSpawnA.median, ""],
  ["extendTtl", results.extendTtl.median, ""],
];
console.log(
  `sandbox-backend bench (uid ${process.getuid()}, node ${process.version}, ${runs} runs, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")})`,
);
for (const [name, value, note] of rows) console.log(`${name.padEnd(32)} median ${value.toFixed(2).padStart(8)} ms  ${note}`);
fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `sandbox-backend-${report.date.replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
console.log(`report: ${path.relative(process.cwd(), file)}`);
