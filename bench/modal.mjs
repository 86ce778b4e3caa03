#!/usr/bin/env node
// Benchmarks of the modal provider against the Modal emulator (gRPC on loopback, real `modal` SDK),
// at 0 ms and 40 ms of latency injected before every gRPC call (the emulator kit's latency fault):
//   execute     `true`, and `cat` with 2 KiB of stdin, on one warm lease, through the worker client
//   sync        syncIn / syncOut of one 64 KiB file through the worker (the kit's streamed tar sync)
//   sync kinds  in-process, on one sandbox: the kit's streamed sync over exec vs its file-API sync
//               over the SDK's filesystem (fs-tools execs), for a 64 KiB and a 4 MiB file
//   task        a real-host-like run: acquire, realize, 13 preflight executes (8 with stdin), 4
//               concurrent tar syncIns with post-upload commands, 25 bridge/poll executes, a
//               syncOut of the workspace, release
// Every figure comes with the gRPC calls the emulator's recorder saw (median per operation) and
// the exec starts among them. Needs the built packages (`npm run build`).
//
//   node bench/modal.mjs [--runs 100] [--task-runs 5] [--out bench/results]
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/modal/dist/index.js";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { fileApiSyncIn, fileApiSyncOut, syncIn, syncOut } from "../packages/kit/dist/index.js";
import { createModalRunner } from "../providers/modal/dist/index.js";
import { measured } from "./lib/recorded.mjs";
import { summarize } from "./lib/stats.mjs";

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
if (!(runs >= 20)) throw new Error("--runs must be at least 20");

const emu = await runEmulator(emulator, {});
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "modal-bench-"));
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/modal"));
// The vendor exec per command (bench/command-channel.mjs measures the kit's command channel beside it).
const client = await startWorker(pkg, { env: { TMPDIR: os.tmpdir(), PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "off" } });
const config = { tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "bench", execTimeoutMs: 120_000 };
const base = { driverKey: "modal", companyId: "bench", environmentId: "bench", config };
const results = { node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs, taskRuns, latency: {} };

async function series(count, work) {
  const times = [];
  const calls = [];
  const execs = [];
  for (let i = 0; i < count; i += 1) {
    const sample = await measured(emu, work);
    times.push(sample.ms);
    calls.push(sample.calls.length);
    execs.push(sample.calls.filter((c) => c === "TaskExecStart").length);
  }
  return { ms: summarize(times), calls: summarize(calls).median, execStarts: summarize(execs).median };
}

function file(name, bytes) {
  const target = path.join(scratch, name);
  fs.writeFileSync(target, Buffer.alloc(bytes, 97));
  return target;
}

/** The SDK filesystem as the kit's FileTransport (what a file-API sync would use). */
function sdkFiles(sandbox) {
  return {
    async upload(target, source, opts) {
      const chunks = [];
      for await (const chunk of source) chunks.push(chunk);
      await sandbox.filesystem.writeBytes(Buffer.concat(chunks), target);
      if (opts?.mode !== undefined) await (await sandbox.exec(["chmod", opts.mode.toString(8), target])).wait();
    },
    async download(target) {
      return Readable.from([Buffer.from(await sandbox.filesystem.readBytes(target))]);
    },
  };
}

/** @param {number} _latencyMs (unused) */
async function syncKinds(_latencyMs) {
  // One sandbox through the SDK directly, the provider's runner on it.
  process.env.MODAL_SERVER_URL = emu.url;
  process.env.MODAL_CONFIG_PATH = "/nonexistent/modal.toml";
  const { ModalClient } = await import("modal");
  const mc = new ModalClient({ tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, logLevel: "error" });
  const app = await mc.apps.fromName("bench-sync", { createIfMissing: true });
  const sandbox = await mc.sandboxes.create(app, mc.images.fromRegistry("node:22"), { workdir: "/workspace/w" });
  const runner = createModalRunner(sandbox, { error: (_op, error) => /** @type {Error} */ (error), retry: (_op, call) => call() });
  const files = sdkFiles(sandbox);
  const out = {};
  try {
    for (const [label, bytes] of [
      ["64KiB", 64 * 1024],
      ["4MiB", 4 * 1024 * 1024],
    ]) {
      const source = file(`kind-${label}`, bytes);
      const back = path.join(scratch, `kind-${label}-back`);
      /** @type {(dir: "in" | "out") => import("@paperclipai/plugin-sdk").PluginSyncOperation[]} */
      const ops = (dir) => [
        {
          operationId: "op",
          files: [dir === "in" ? { sourcePath: source, targetPath: `/workspace/w/${label}`, kind: "file" } : { sourcePath: `/workspace/w/${label}`, targetPath: back, kind: "file" }],
        },
      ];
      const opts = { roots: ["/workspace/w"] };
      const count = label === "4MiB" ? Math.min(runs, 20) : Math.min(runs, 50);
      out[label] = {
        streamIn: await series(count, () => syncIn(runner, ops("in"), opts)),
        fileApiIn: await series(count, () => fileApiSyncIn(runner, files, ops("in"), opts)),
        streamOut: await series(count, () => syncOut(runner, ops("out"), opts)),
        fileApiOut: await series(count, () => fileApiSyncOut(runner, files, ops("out"), opts)),
      };
    }
  } finally {
    await sandbox.terminate();
    sandbox.detach();
    mc.close();
    delete process.env.MODAL_SERVER_URL;
  }
  return out;
}

/** What one trivial claude_local run asks of the provider (scripts/e2e-paperclip/HOST-CALLS.md §1). */
async function taskRun() {
  const ws = path.join(scratch, "ws");
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, "README.md"), "hello\n");
  const tars = [];
  for (let i = 0; i < 4; i += 1) {
    const t = path.join(scratch, `seed-${i}.tar`);
    if (!fs.existsSync(t)) {
      const { execFileSync } = await import("node:child_process");
      execFileSync("tar", ["-cf", t, "-C", ws, "README.md"]);
    }
    tars.push(t);
  }
  const lease = await client.env.acquireLease({ ...base, runId: `task-${Date.now()}`, agentId: "bench" });
  const remote = /** @type {string} */ (lease.metadata.remoteCwd);
  const exec = (command, args = [], more = {}) => client.env.execute({ ...base, lease, command, args, ...more });
  try {
    await client.env.realizeWorkspace({ ...base, lease, workspace: { localPath: ws, remotePath: remote, mode: "shared_workspace" } });
    await exec("sh", ["-c", "printf '%s' \"$PATH\"; cat /etc/hosts >/dev/null"]);
    await exec("sh", ["-c", 'printf "\\0%s\\0" "$PATH"']);
    const blob = Buffer.alloc(1536, 120).toString("base64");
    for (let i = 0; i < 8; i += 1)
      await exec("sh", ["-c", `mkdir -p .paperclip-runtime/gh && cat > .paperclip-runtime/gh/f${i}.b64 && base64 -d .paperclip-runtime/gh/f${i}.b64 > .paperclip-runtime/gh/f${i}`], { stdin: blob });
    await exec("sh", ["-c", "chmod 700 .paperclip-runtime/gh/f0"]);
    await exec("sh", ["-c", "command -v node"]);
    await exec("sh", ["-c", "command -v node >/dev/null 2>&1"], { cwd: "/" });
    await Promise.all(
      tars.map((tar, i) =>
        client.env.syncIn({
          ...base,
          lease,
          operations: [
            {
              operationId: `sync-op-${i}`,
              files: [{ sourcePath: tar, targetPath: `${remote}/.paperclip-runtime/claude/upload-${i}.tar`, kind: "file" }],
              postUploadCommands: [
                {
                  command: `mkdir -p ${remote}/.paperclip-runtime/claude/d${i} && tar -xf ${remote}/.paperclip-runtime/claude/upload-${i}.tar -C ${remote}/.paperclip-runtime/claude/d${i} && rm -f ${remote}/.paperclip-runtime/claude/upload-${i}.tar`,
                },
              ],
            },
          ],
        }),
      ),
    );
    for (let i = 0; i < 25; i += 1) await exec("sh", ["-c", "ls .paperclip-runtime/claude/ >/dev/null 2>&1; true"]);
    await client.env.syncOut({
      ...base,
      lease,
      operations: [{ operationId: "out", files: [{ sourcePath: remote, targetPath: path.join(scratch, `restore-${Date.now()}`), kind: "directory", exclude: [".paperclip-runtime"] }] }],
    });
    await exec("rm", ["-rf", "--", `${remote}/.paperclip-runtime/gh`], { timeoutMs: 5_000 });
  } finally {
    await client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
  }
}

try {
  for (const latencyMs of [0, 40]) {
    emu.faults.clear();
    if (latencyMs > 0) emu.faults.inject({ kind: "latency", route: "*", ms: latencyMs });
    const row = {};
    const acquired = await measured(emu, () => client.env.acquireLease({ ...base, runId: `bench-${latencyMs}`, agentId: "bench" }));
    const lease = acquired.value;
    row.acquire = { ms: acquired.ms, calls: acquired.calls.length };
    try {
      for (let i = 0; i < 5; i += 1) await client.env.execute({ ...base, lease, command: "true" });
      row.execute = await series(runs, () => client.env.execute({ ...base, lease, command: "true" }));
      const stdin = "x".repeat(2048);
      row.executeStdin = await series(runs, () => client.env.execute({ ...base, lease, command: "cat", stdin }));
      const source = file("sync-64k", 64 * 1024);
      const target = `${lease.metadata.remoteCwd}/sync-64k`;
      row.syncIn = await series(Math.min(runs, 50), () =>
        client.env.syncIn({ ...base, lease, operations: [{ operationId: "in", files: [{ sourcePath: source, targetPath: target, kind: "file" }] }] }),
      );
      row.syncOut = await series(Math.min(runs, 50), () =>
        client.env.syncOut({ ...base, lease, operations: [{ operationId: "out", files: [{ sourcePath: target, targetPath: path.join(scratch, "sync-64k-back"), kind: "file" }] }] }),
      );
    } finally {
      const released = await measured(emu, () => client.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }));
      row.release = { ms: released.ms, calls: released.calls.length };
    }
    row.syncKinds = await syncKinds(latencyMs);
    const tasks = [];
    const taskCalls = [];
    for (let i = 0; i < taskRuns; i += 1) {
      const sample = await measured(emu, taskRun);
      tasks.push(sample.ms);
      taskCalls.push(sample.calls.length);
    }
    row.task = { ms: summarize(tasks), calls: summarize(taskCalls).median };
    results.latency[latencyMs] = row;

    const f = (s) => `${s.ms.median.toFixed(1)} ms (p95 ${s.ms.p95.toFixed(1)}), ${s.calls} calls, ${s.execStarts} exec`;
    console.log(`\n== modal, ${latencyMs} ms injected per gRPC call`);
    console.log(`acquire            ${row.acquire.ms.toFixed(1)} ms, ${row.acquire.calls} calls (first of the worker: auth, app, environment, image)`);
    console.log(`execute true       ${f(row.execute)}`);
    console.log(`execute + stdin    ${f(row.executeStdin)}`);
    console.log(`syncIn 64 KiB      ${f(row.syncIn)}`);
    console.log(`syncOut 64 KiB     ${f(row.syncOut)}`);
    console.log(`release            ${row.release.ms.toFixed(1)} ms, ${row.release.calls} calls`);
    for (const [label, k] of Object.entries(row.syncKinds)) {
      console.log(`sync ${label.padEnd(5)} in:  stream ${f(k.streamIn)} | file API ${f(k.fileApiIn)} | ${(k.fileApiIn.ms.median / k.streamIn.ms.median).toFixed(2)}x`);
      console.log(`sync ${label.padEnd(5)} out: stream ${f(k.streamOut)} | file API ${f(k.fileApiOut)} | ${(k.fileApiOut.ms.median / k.streamOut.ms.median).toFixed(2)}x`);
    }
    console.log(`task run           ${row.task.ms.median.toFixed(0)} ms (p95 ${row.task.ms.p95.toFixed(0)}), ${row.task.calls} calls`);
  }
  fs.mkdirSync(args.out, { recursive: true });
  const report = path.join(args.out, `modal-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  fs.writeFileSync(report, JSON.stringify(results, null, 2));
  console.log(`\nreport: ${report}`);
} finally {
  emu.faults.clear();
  await client.shutdown?.().catch(() => undefined);
  // Calls the emulator did not serve (no route, UNIMPLEMENTED, refused): a missing route shows here.
  const unserved = emu.requests.unserved();
  console.log(`unserved calls: ${unserved.length ? unserved.map((u) => `${u.count}x ${u.method} ${u.target} (${u.reason})`).join(", ") : "none"}`);
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
}
