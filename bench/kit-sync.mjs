#!/usr/bin/env node
// Kit sync throughput: syncIn / syncOut of a 100 MiB tree of 10,000 files through the kit's local
// script runner (no jail), next to a plain `tar -c | tar -x` of the same tree timed in the same
// run (interleaved, so machine load affects both alike). Reports medians, the ratio of each
// direction to the plain-tar median, and this process's peak RSS (VmHWM) after every run.
// Needs the built kit (`npx tsc -b packages/kit`).
//
//   node bench/kit-sync.mjs [--runs 5] [--files 10000] [--mib 100] [--out bench/results]
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createLocalScriptRunner, syncIn, syncOut } from "../packages/kit/dist/index.js";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "5" },
    files: { type: "string", default: "10000" },
    mib: { type: "string", default: "100" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const fileCount = Number(args.files);
const totalBytes = Number(args.mib) * 1024 * 1024;
if (!(Number.isInteger(runs) && runs >= 1)) throw new Error("--runs must be a positive integer");
if (!(Number.isInteger(fileCount) && fileCount >= 1)) throw new Error("--files must be a positive integer");
if (!(totalBytes > 0)) throw new Error("--mib must be positive");

const MiB = 1024 * 1024;
const seconds = (start) => Number(process.hrtime.bigint() - start) / 1e9;
function memory() {
  const text = fs.readFileSync("/proc/self/status", "utf8");
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { hwmMiB: round(kb("VmHWM") / 1024), rssMiB: round(kb("VmRSS") / 1024) };
}
/** Reset VmHWM to the current RSS (Linux >= 4.0), so each step's own peak can be read. */
function resetPeak() {
  try {
    fs.writeFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
}
const round = (x, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;
function sh(script) {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", script], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`${script}: exit ${code}: ${stderr}`))));
  });
}
const q = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

const base = await fsp.realpath(await fsp.mkdtemp(path.join(os.tmpdir(), "kit-sync-bench-")));
const cleanup = () => fs.rmSync(base, { recursive: true, force: true });
process.once("SIGINT", () => {
  cleanup();
  process.exit(130);
});
const dirs = {
  host: path.join(base, "host"),
  sandbox: path.join(base, "sandbox"),
  scratch: path.join(base, "scratch"),
  sandboxTmp: path.join(base, "sandbox-tmp"),
};
const report = {
  benchmark: "kit-sync",
  date: new Date().toISOString(),
  node: process.version,
  cpus: os.cpus().length,
  loadavgBefore: os.loadavg().map((x) => round(x, 2)),
  tree: { files: fileCount, bytes: 0 },
  runs: [],
};

try {
  for (const dir of Object.values(dirs)) await fsp.mkdir(dir);
  // The tree: 100 files per directory, sizes adding up to --mib, varied content.
  const tree = path.join(dirs.host, "tree");
  const perFile = Math.floor(totalBytes / fileCount);
  const pool = randomBytes(4 * MiB);
  let written = 0;
  for (let i = 0; i < fileCount; i += 100) {
    const dir = path.join(tree, `d${String(i / 100).padStart(3, "0")}`);
    await fsp.mkdir(dir, { recursive: true });
    await Promise.all(
      Array.from({ length: Math.min(100, fileCount - i) }, (_, j) => {
        const n = i + j;
        const size = perFile + (n === fileCount - 1 ? totalBytes - perFile * fileCount : 0);
        const offset = (n * 7919) % (pool.length - size);
        written += size;
        return fsp.writeFile(path.join(dir, `f${String(j).padStart(3, "0")}.bin`), pool.subarray(offset, offset + size));
      }),
    );
  }
  report.tree.bytes = written;
  console.log(`tree: ${fileCount} files, ${round(written / MiB)} MiB in ${tree}`);

  const runner = createLocalScriptRunner({
    cwd: dirs.sandbox,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: dirs.sandboxTmp, LC_ALL: "C" },
  });
  const roots = [dirs.sandbox];
  const inTarget = path.join(dirs.sandbox, "tree");
  const outTarget = path.join(dirs.host, "out");
  const plainTarget = path.join(dirs.host, "plain");
  /** @type {import("@paperclipai/plugin-sdk").PluginSyncOperation[]} */
  const inOps = [{ operationId: "in", files: [{ sourcePath: tree, targetPath: inTarget, kind: "directory" }] }];
  /** @type {import("@paperclipai/plugin-sdk").PluginSyncOperation[]} */
  const outOps = [{ operationId: "out", files: [{ sourcePath: inTarget, targetPath: outTarget, kind: "directory" }] }];
  const check = (result, label) => {
    const op = result.operations[0];
    if (op?.filesTransferred !== fileCount || op.bytesTransferred !== written) {
      throw new Error(`${label}: moved ${op?.filesTransferred} files / ${op?.bytesTransferred} bytes, expected ${fileCount} / ${written}`);
    }
  };
  const canReset = resetPeak();

  for (let run = 1; run <= runs; run++) {
    const sample = { run };
    // Order alternates between runs so a warming cache does not favour one side.
    const steps = [
      async () => {
        await fsp.rm(plainTarget, { recursive: true, force: true });
        await fsp.mkdir(plainTarget);
        const start = process.hrtime.bigint();
        await sh(`tar -c -f - -C ${q(tree)} . | tar -x -f - -C ${q(plainTarget)}`);
        sample.plainTarS = round(seconds(start), 3);
        await fsp.rm(plainTarget, { recursive: true, force: true });
      },
      async () => {
        if (canReset) resetPeak();
        const start = process.hrtime.bigint();
        check(await syncIn(runner, inOps, { roots }), "syncIn");
        sample.syncInS = round(seconds(start), 3);
        sample.syncInPeakMiB = memory().hwmMiB;
        if (canReset) resetPeak();
        const startOut = process.hrtime.bigint();
        check(await syncOut(runner, outOps, { roots, hostScratchDir: dirs.scratch }), "syncOut");
        sample.syncOutS = round(seconds(startOut), 3);
        sample.syncOutPeakMiB = memory().hwmMiB;
        await fsp.rm(outTarget, { recursive: true, force: true });
      },
    ];
    if (run % 2 === 0) steps.reverse();
    for (const step of steps) await step();
    globalThis.gc?.();
    sample.rssAfterMiB = memory().rssMiB;
    report.runs.push(sample);
    console.log(
      `run ${run}/${runs}: plain tar|tar ${sample.plainTarS.toFixed(2)} s | syncIn ${sample.syncInS.toFixed(2)} s (peak RSS ${sample.syncInPeakMiB} MiB)` +
        ` | syncOut ${sample.syncOutS.toFixed(2)} s (peak RSS ${sample.syncOutPeakMiB} MiB) | RSS after ${sample.rssAfterMiB} MiB`,
    );
  }

  const plain = summarize(report.runs.map((r) => r.plainTarS));
  const inS = summarize(report.runs.map((r) => r.syncInS));
  const outS = summarize(report.runs.map((r) => r.syncOutS));
  const peaks = report.runs.flatMap((r) => [r.syncInPeakMiB, r.syncOutPeakMiB]);
  report.peakResetPerStep = canReset;
  report.summary = {
    plainTarS: plain,
    syncInS: inS,
    syncOutS: outS,
    syncInRatio: round(inS.median / plain.median, 2),
    syncOutRatio: round(outS.median / plain.median, 2),
    peakRssMiB: { first: peaks[0], last: peaks.at(-1), max: Math.max(...peaks) },
  };
  report.loadavgAfter = os.loadavg().map((x) => round(x, 2));

  console.log("");
  console.log(`                 median     min      max   (${runs} runs, ${fileCount} files, ${round(written / MiB)} MiB)`);
  for (const [label, s] of /** @type {[string, ReturnType<typeof summarize>][]} */ ([
    ["plain tar | tar", plain],
    ["syncIn", inS],
    ["syncOut", outS],
  ])) {
    console.log(`${label.padEnd(16)} ${s.median.toFixed(2).padStart(6)} s ${s.min.toFixed(2).padStart(6)} s ${s.max.toFixed(2).padStart(6)} s`);
  }
  console.log(`ratio to plain tar: syncIn ${report.summary.syncInRatio}x, syncOut ${report.summary.syncOutRatio}x`);
  console.log(`peak RSS per sync step (VmHWM${canReset ? ", reset before each step" : ", cumulative"}): first ${peaks[0]} MiB, last ${peaks.at(-1)} MiB, max ${Math.max(...peaks)} MiB`);

  await fsp.mkdir(args.out, { recursive: true });
  const file = path.join(args.out, `kit-sync-${report.date.replace(/[:.]/g, "-")}.json`);
  await fsp.writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`report: ${path.relative(process.cwd(), file)}`);
} finally {
  cleanup();
}
