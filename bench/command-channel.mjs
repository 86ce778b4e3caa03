#!/usr/bin/env node
// The kit's command channel (withCommandChannel) against a vendor exec per command, side by side in
// one run, for each provider that uses it, against its emulator, at 0 ms and 40 ms injected before
// every vendor call (the emulator kit's latency fault on every route). Two workers per provider,
// forked as the host forks them: one with PAPERCLIP_SANDBOX_COMMAND_CHANNEL=off ("exec"), one
// without ("channel"). Per latency:
//   execute   `true` on a warm lease (the channel started by the lease's first command), the two
//             workers alternating; median time and the vendor calls the emulator's recorder saw
//             per execute (target 0 on a warm lease)
//   stdin     the same with 1 KiB of stdin
//   syncIn    one directory (20 files, 60 KiB) synced in, then syncOut: the same directory back;
//             median time and vendor calls per operation
//   task      a host-like run end to end (bench/host-like-run.mjs: acquire .. release, ~52
//             executes, 4 syncIns, 1 syncOut), alternating, median time and vendor calls per run
//
//   node bench/command-channel.mjs [--providers kubernetes,modal,e2b,novita,boxd,coder,cloudflare] [--runs 50]
//                                  [--task-runs 3] [--latency 0,40] [--out bench/results]
//                                  [--modes exec,channel[,channel-sync-off]]
// Modes: exec (PAPERCLIP_SANDBOX_COMMAND_CHANNEL=off), channel (the default), channel-sync-off (the
// channel for commands, sync as without it: PAPERCLIP_SANDBOX_SYNC_CHANNEL=off; the "before" of
// sync over the channel, in the same run).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { hostLikeRun, makeRunStartTrees } from "./host-like-run.mjs";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    providers: { type: "string", default: "kubernetes,modal,e2b,novita" },
    runs: { type: "string", default: "50" },
    "task-runs": { type: "string", default: "3" },
    latency: { type: "string", default: "0,40" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
    modes: { type: "string", default: "exec,channel" },
  },
});
const runs = Number(args.runs);
const taskRuns = Number(args["task-runs"]);
const latencies = args.latency.split(",").map(Number);
if (!(runs >= 10 && taskRuns >= 1)) throw new Error("--runs must be at least 10, --task-runs at least 1");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
const median = (xs) => summarize(xs).median;

/** Each provider: its emulator, its config from the running emulator, and calls that are not the operation's. */
const PROVIDERS = {
  kubernetes: {
    emulator: async () => runEmulator((await import("../emulators/kubernetes/dist/index.js")).emulator),
    config: (emu) => ({ kubeconfig: emu.credentials.kubeconfig, timeoutMs: 60_000, readyTimeoutSec: 60 }),
  },
  modal: {
    emulator: async () => runEmulator((await import("../emulators/modal/dist/index.js")).emulator, {}),
    config: (emu) => ({ tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "bench", execTimeoutMs: 120_000 }),
  },
  e2b: {
    emulator: async () => runEmulator((await import("../emulators/envd/dist/index.js")).emulator, { options: { maxSandboxes: 50 } }),
    config: (emu) => ({ apiKey: emu.credentials.apiKey, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 600_000 }),
    // The keepalive's timeout refreshes run on their own timer.
    background: (record) => record.route === "/sandboxes/:id/timeout",
  },
  novita: {
    emulator: async () => runEmulator((await import("../emulators/envd/dist/index.js")).emulator, { options: { maxSandboxes: 50 } }),
    config: async (emu) => {
      const { SANDBOX_HOME } = await import("../emulators/envd/dist/index.js");
      return { apiKey: emu.credentials.apiKey, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 600_000, requestedCwd: `${SANDBOX_HOME}/paperclip-workspace` };
    },
    background: (record) => record.route === "/sandboxes/:id/timeout",
  },
  // Calls: SSH sessions (and connections) and API calls. Its latency fault delays the HTTP API's
  // calls and each SSH session's start (commands on an open session are not delayed).
  "exe-dev": {
    emulator: async () => (await import("../emulators/exe-dev/dist/index.js")).startExeDevEmulator(),
    config: (emu) => ({ apiKey: emu.credentials.apiKey, apiUrl: emu.endpoints.http, sshPrivateKey: emu.credentials.sshPrivateKey, timeoutMs: 600_000 }),
  },
  boxd: {
    emulator: async () => runEmulator((await import("../emulators/boxd/dist/index.js")).emulator, {}),
    config: (emu) => ({ apiKey: emu.credentials.apiKey, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange, timeoutMs: 600_000 }),
  },
  coder: {
    emulator: async () =>
      runEmulator((await import("../emulators/coder/dist/index.js")).emulator, { options: { templates: [(await import("../providers/coder/dist/runner-install.js")).runnerEmulatorTemplate()] } }),
    // The default transport (app-proxy: the runner app's stream route through Coder's app proxy).
    config: (emu) => ({ coderUrl: emu.url, apiToken: emu.credentials.sessionToken, template: "paperclip", timeoutMs: 600_000 }),
  },
  // Calls: the bridge's routes (the plugin's requests); the container's, behind the bridge, are not
  // counted. The channel is the bridge's terminal WebSocket (its multiplexer on a raw PTY).
  cloudflare: {
    emulator: async () => runEmulator((await import("../emulators/cloudflare/dist/index.js")).emulator, {}),
    config: (emu) => ({ bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token, timeoutMs: 600_000 }),
    background: (record) => !(record.route ?? record.path).startsWith("/api/paperclip-sandbox/v1/"),
  },
};

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "channel-bench-"));
const trees = makeRunStartTrees(scratch);
const report = { date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs, taskRuns, results: {} };
/** Each mode's worker environment. */
const MODE_ENV = {
  exec: { PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "off" },
  channel: {},
  "channel-sync-off": { PAPERCLIP_SANDBOX_SYNC_CHANNEL: "off" },
};
const MODES = args.modes.split(",");
for (const mode of MODES) if (!MODE_ENV[mode]) throw new Error(`--modes: unknown mode ${mode}`);
/** The modes in a different order each round (i), so none always goes first. */
const rotated = (i) => MODES.map((_, k) => MODES[(k + i) % MODES.length]);
/** One sample list per mode. */
const perMode = () => Object.fromEntries(MODES.map((mode) => [mode, { ms: [], calls: [], executes: 0 }]));

for (const name of args.providers.split(",")) {
  const spec = PROVIDERS[name];
  if (!spec) throw new Error(`--providers: unknown provider ${name}`);
  const emu = await spec.emulator();
  const workers = {};
  try {
    const pkg = await loadPluginPackage(path.join(repoRoot, "providers", name));
    for (const mode of MODES) workers[mode] = await startWorker(pkg, { env: { TMPDIR: os.tmpdir(), ...MODE_ENV[mode] } });
    const config = await spec.config(emu);
    const base = { driverKey: name, companyId: "bench", environmentId: "bench", config };
    // A channel is one call that runs as long as it lives, so the recorder is never idle: calls are
    // counted as they arrive (running ones included), once no new one has come for 50 ms.
    const quiet = async () => {
      for (let seen = -1, rounds = 0; rounds < 40; rounds += 1) {
        const now = emu.requests.mark();
        if (now === seen) return;
        seen = now;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const calls = async (mark) => {
      await quiet();
      return emu.requests.list({ since: mark, includeRunning: true }).filter((r) => !spec.background?.(r)).length;
    };
    /** Time and vendor calls of one operation. */
    const measured = async (work) => {
      await quiet();
      const mark = emu.requests.mark();
      const started = process.hrtime.bigint();
      const value = await work();
      const elapsed = ms(started);
      return { value, ms: elapsed, calls: await calls(mark) };
    };
    report.results[name] = {};
    for (const latencyMs of spec.latencies ?? latencies) {
      emu.faults.clear();
      if (latencyMs > 0) emu.faults.inject({ kind: "latency", ms: latencyMs, route: "*" });
      /** @type {Record<string, any>} */
      const row = (report.results[name][`${latencyMs}ms`] = {});
      const leases = {};
      for (const mode of MODES) {
        leases[mode] = await workers[mode].env.acquireLease({ ...base, runId: `bench-${mode}-${latencyMs}`, agentId: "bench" });
        // The lease's first command runs as a vendor exec and starts the channel beside it.
        await workers[mode].env.execute({ ...base, lease: leases[mode], command: "true", args: [], cwd: leases[mode].metadata.remoteCwd });
      }
      await new Promise((resolve) => setTimeout(resolve, 2_000 + 10 * latencyMs));
      for (const { kind, extra } of [
        { kind: "execute", extra: {} },
        { kind: "stdin", extra: { stdin: "x".repeat(1024) } },
      ]) {
        const samples = perMode();
        for (let i = 0; i < (kind === "execute" ? runs : Math.ceil(runs / 2)); i += 1) {
          for (const mode of rotated(i)) {
            const lease = leases[mode];
            const sample = await measured(() => workers[mode].env.execute({ ...base, lease, command: kind === "execute" ? "true" : "cat", args: [], cwd: lease.metadata.remoteCwd, ...extra }));
            if (sample.value.exitCode !== 0) throw new Error(`${name} ${mode} ${kind}: exit ${sample.value.exitCode}: ${sample.value.stderr}`);
            samples[mode].ms.push(sample.ms);
            samples[mode].calls.push(sample.calls);
          }
        }
        row[kind] = Object.fromEntries(MODES.map((mode) => [mode, { medianMs: +median(samples[mode].ms).toFixed(2), callsPerExecute: median(samples[mode].calls) }]));
      }
      // Sync on the warm lease: one directory in (a fresh target each time), then the same one back.
      for (const kind of ["syncIn", "syncOut"]) {
        const samples = perMode();
        for (let i = 0; i < Math.max(5, Math.ceil(runs / 5)); i += 1) {
          for (const mode of rotated(i)) {
            const lease = leases[mode];
            const target = `${lease.metadata.remoteCwd}/.bench-sync/in-${i}`;
            const back = path.join(scratch, `back-${name}-${mode}-${latencyMs}-${i}`);
            const sample = await measured(() =>
              kind === "syncIn"
                ? workers[mode].env.syncIn({ ...base, lease, operations: [{ operationId: `bench-in-${i}`, files: [{ sourcePath: trees[0], targetPath: target, kind: "directory" }] }] })
                : workers[mode].env.syncOut({ ...base, lease, operations: [{ operationId: `bench-out-${i}`, files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }] }),
            );
            if (kind === "syncOut" && fs.readdirSync(back).length === 0) throw new Error(`${name} ${mode} syncOut: nothing came back`);
            fs.rmSync(back, { recursive: true, force: true });
            samples[mode].ms.push(sample.ms);
            samples[mode].calls.push(sample.calls);
          }
        }
        row[kind] = Object.fromEntries(MODES.map((mode) => [mode, { medianMs: +median(samples[mode].ms).toFixed(2), callsPerOperation: median(samples[mode].calls) }]));
      }
      for (const mode of MODES) await workers[mode].env.releaseLease({ ...base, providerLeaseId: leases[mode].providerLeaseId, leaseMetadata: leases[mode].metadata });
      const tasks = perMode();
      for (let r = 0; r < taskRuns; r += 1) {
        for (const mode of rotated(r)) {
          const sample = await measured(() => hostLikeRun({ client: workers[mode], base, trees, scratch, tag: `${name}-${mode}-${latencyMs}-${r}` }));
          tasks[mode].ms.push(sample.ms);
          tasks[mode].calls.push(sample.calls);
          tasks[mode].executes = sample.value.executes;
        }
      }
      row.task = Object.fromEntries(MODES.map((mode) => [mode, { medianMs: Math.round(median(tasks[mode].ms)), calls: median(tasks[mode].calls), executes: tasks[mode].executes }]));
      const each = (kind, unit) => MODES.map((mode) => `${mode} ${row[kind][mode].medianMs} ms, ${row[kind][mode][unit]} calls`).join(" | ");
      console.log(
        `[bench] ${name} @ ${latencyMs} ms: execute ${each("execute", "callsPerExecute")}; syncIn ${each("syncIn", "callsPerOperation")}; ` +
          `syncOut ${each("syncOut", "callsPerOperation")}; task ${each("task", "calls")}`,
      );
    }
  } finally {
    for (const worker of Object.values(workers)) await worker.shutdown().catch(() => undefined);
    emu.faults.clear();
    await emu.close();
  }
}
fs.rmSync(scratch, { recursive: true, force: true });

fs.mkdirSync(args.out, { recursive: true });
const file = path.join(args.out, `command-channel-${report.date.replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
console.log(
  `\ncommand channel bench (node ${process.version}, ${report.cpus} cpus, load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}; ${runs} executes, ${taskRuns} task runs per mode)`,
);
const header = ["execute", "1 KiB stdin", "syncIn", "syncOut", "task run"].flatMap((kind) => MODES.map((mode) => `${kind}: ${mode}`));
console.log(`| provider | latency | ${header.join(" | ")} |`);
console.log(`|---|---|${header.map(() => "---").join("|")}|`);
for (const [name, byLatency] of Object.entries(report.results)) {
  for (const [latency, row] of Object.entries(byLatency)) {
    const cells = [
      ...["execute", "stdin"].flatMap((kind) => MODES.map((mode) => `${row[kind][mode].medianMs} ms, ${row[kind][mode].callsPerExecute} calls`)),
      ...["syncIn", "syncOut"].flatMap((kind) => MODES.map((mode) => `${row[kind][mode].medianMs} ms, ${row[kind][mode].callsPerOperation} calls`)),
      ...MODES.map((mode) => `${row.task[mode].medianMs} ms, ${row.task[mode].calls} calls`),
    ];
    console.log(`| ${name} | ${latency} | ${cells.join(" | ")} |`);
  }
}
console.log(`report: ${path.relative(repoRoot, file)}`);
