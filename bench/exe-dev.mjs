#!/usr/bin/env node
// The exe-dev provider against the exe.dev emulator (its /exec API, and a real OpenSSH server per VM
// whose sessions run in the VM's bubblewrap jail), through the worker client (forked as the host
// forks it). Per case, interleaved in one loop (the order alternates each round) so load hits all alike:
//   execute      a `true` execute on a warm lease: one channel on the lease's multiplexed connection
//                (worker RPC, the kit's exec script, group-kill wrapper and exit marker included)
//   fresh-ssh    the baseline: `ssh … true` with a new connection per command (TCP, key exchange,
//                host-key check, public-key auth, session), as a provider without multiplexing does
//   mux-channel  `ssh -S <control socket> … true` from the bench: the bare channel cost the execute pays
// Then the API calls and SSH connections of a lease's lifecycle (acquire, 3 executes, release), from the
// emulator's recorder.
// Needs the built packages (`npm run build`) and OpenSSH (ssh, sshd, ssh-keygen).
//
//   node bench/exe-dev.mjs [--runs 100] [--lifecycles 5] [--out bench/results]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPluginPackage, startWorker } from "../packages/worker-client/dist/index.js";
import { startExeDevEmulator } from "../emulators/exe-dev/dist/index.js";
import { summarize } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "100" },
    lifecycles: { type: "string", default: "5" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const runs = Number(args.runs);
const lifecycles = Number(args.lifecycles);
if (!(runs >= 20) || !(lifecycles >= 1)) throw new Error("--runs must be at least 20 and --lifecycles at least 1");

const ms = (start) => Number(process.hrtime.bigint() - start) / 1e6;
/** Runs a client process to its end; its exit code (asynchronously: the emulator shares this event loop). */
function run(file, argv) {
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${file} exited ${code}: ${stderr.trim()}`))));
  });
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "exe-dev-bench-"));
const emu = await startExeDevEmulator();
const pkg = await loadPluginPackage(path.join(repoRoot, "providers/exe-dev"));
// The worker keeps its SSH state under its TMPDIR: the bench's scratch directory.
const client = await startWorker(pkg, { env: { TMPDIR: scratch } });
const config = { apiKey: emu.credentials.apiKey, apiUrl: emu.endpoints.http, sshPrivateKey: emu.credentials.sshPrivateKey, timeoutMs: 120_000 };
const base = () => ({ driverKey: "exe-dev", companyId: "bench", environmentId: "bench", config });
let leaseCount = 0;
const acquire = () => client.env.acquireLease({ ...base(), runId: `bench-${leaseCount++}`, agentId: "bench", adapterType: "claude_local" });
const exec = (lease, command) => client.env.execute({ ...base(), lease, command: "sh", args: ["-c", command], cwd: lease.metadata.remoteCwd });
const release = (lease) => client.env.releaseLease({ ...base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });

const keyFile = path.join(scratch, "id");
fs.writeFileSync(keyFile, emu.credentials.sshPrivateKey, { mode: 0o600 });
const control = path.join(scratch, "c");

const results = {};
let lease;
try {
  lease = await acquire();
  const vm = emu.control.sshHost(lease.providerLeaseId);
  const user = lease.metadata.vmSshUser;
  const common = [
    "-F",
    "none",
    "-o",
    "BatchMode=yes",
    "-o",
    "LogLevel=ERROR",
    "-i",
    keyFile,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    `UserKnownHostsFile=${path.join(scratch, "known_hosts")}`,
    "-o",
    "StrictHostKeyChecking=accept-new",
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-p",
    String(vm.port),
    "-l",
    user,
  ];
  await run("ssh", [...common, "-M", "-N", "-f", "-o", `ControlPath=${control}`, "-o", "ControlPersist=120", "127.0.0.1"]);
  const cases = {
    execute: async () => {
      const result = await exec(lease, "true");
      if (result.exitCode !== 0) throw new Error(`execute: exit ${result.exitCode}`);
    },
    "fresh-ssh": () => run("ssh", [...common, "127.0.0.1", "true"]),
    "mux-channel": () => run("ssh", [...common, "-o", `ControlPath=${control}`, "-o", "ControlMaster=no", "127.0.0.1", "true"]),
  };
  const names = Object.keys(cases);
  for (let i = 0; i < 5; i += 1) for (const name of names) await cases[name](); // warm-up
  const connectionsBefore = vm.connections;
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  for (let i = 0; i < runs; i += 1) {
    for (const name of i % 2 === 0 ? names : [...names].reverse()) {
      const started = process.hrtime.bigint();
      await cases[name]();
      samples[name].push(ms(started));
    }
  }
  const freshConnections = vm.connections - connectionsBefore;
  for (const name of names) results[name] = summarize(samples[name]);
  results.connections = { duringLoop: freshConnections, freshSshRuns: runs, note: "every fresh-ssh run opens one; execute and mux-channel open none" };

  console.log(`\n== time per command on a warm lease (${runs} runs each, interleaved)`);
  console.log(`${"case".padEnd(14)} ${"median ms".padStart(10)} ${"p95 ms".padStart(9)} ${"x execute".padStart(10)}`);
  for (const name of names) {
    const r = results[name];
    console.log(`${name.padEnd(14)} ${r.median.toFixed(1).padStart(10)} ${r.p95.toFixed(1).padStart(9)} ${(r.median / results.execute.median).toFixed(2).padStart(10)}`);
  }
  results.ratio = results["fresh-ssh"].median / results.execute.median;
  console.log(`fresh ssh per command / multiplexed execute: ${results.ratio.toFixed(1)}x (target >= 5x); TCP connections opened in the loop: ${freshConnections} (all fresh-ssh)`);

  await release(lease);
  lease = undefined;

  // A lease's lifecycle, as the host drives a short run: acquire, three executes, release.
  const lifecycle = [];
  for (let i = 0; i < lifecycles; i += 1) {
    await emu.requests.idle();
    const mark = emu.requests.mark();
    const started = process.hrtime.bigint();
    const l = await acquire();
    for (let j = 0; j < 3; j += 1) await exec(l, "true");
    await release(l);
    const took = ms(started);
    await emu.requests.idle();
    const records = emu.requests.list({ since: mark });
    const api = records.filter((r) => r.protocol === "http");
    const byCommand = {};
    for (const r of api) byCommand[r.notes.command ?? r.path] = (byCommand[r.notes.command ?? r.path] ?? 0) + 1;
    lifecycle.push({
      ms: took,
      apiCalls: api.length,
      byCommand,
      sshConnections: records.filter((r) => r.protocol === "ssh" && r.method === "CONNECT").length,
      sshSessions: records.filter((r) => r.protocol === "ssh" && r.method === "EXEC").length,
    });
  }
  results.lifecycle = { runs: lifecycle, ms: summarize(lifecycle.map((l) => l.ms)) };
  const first = lifecycle[0];
  console.log(`\n== lease lifecycle (acquire, 3 executes, release; ${lifecycles} runs)`);
  console.log(
    `API calls per lifecycle: ${first.apiCalls} (${Object.entries(first.byCommand)
      .map(([c, n]) => `${c} ${n}`)
      .join(", ")}); SSH connections: ${first.sshConnections}; SSH sessions: ${first.sshSessions}; median ${results.lifecycle.ms.median.toFixed(0)} ms`,
  );
} finally {
  if (lease) await release(lease).catch(() => undefined);
  await run("ssh", ["-F", "none", "-o", `ControlPath=${control}`, "-O", "exit", "127.0.0.1"]).catch(() => undefined);
  await client.shutdown().catch(() => undefined);
  const left = await emu.leftovers();
  await emu.close();
  fs.rmSync(scratch, { recursive: true, force: true });
  if (left.length) console.log(`leftovers: ${left.join(", ")}`);
}

fs.mkdirSync(args.out, { recursive: true });
const report = path.join(args.out, `exe-dev-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
fs.writeFileSync(report, JSON.stringify({ node: process.version, cpus: os.cpus().length, load: os.loadavg(), runs, lifecycles, results }, null, 2));
console.log(`\nreport: ${path.relative(repoRoot, report)}`);
