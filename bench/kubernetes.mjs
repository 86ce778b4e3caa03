// Kubernetes provider against the in-repo Kubernetes API test server: API requests and time per
// acquire, execute, sync-in and sync-out operation, at 0 ms and 40 ms injected latency per API
// request (WebSocket handshakes included). Baseline in the same run: the same command straight on
// the pod's jail runner (what the test server's "kubelet" runs), so the ratio is the cost of the
// API path (client-node, HTTP/WebSocket, channel framing, group-kill wrapper).
//   node bench/kubernetes.mjs [--runs 30] [--out bench/results]
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
// The vendor exec per command (bench/command-channel.mjs measures the kit's command channel beside it).
process.env.PAPERCLIP_SANDBOX_COMMAND_CHANNEL = "off";
import { runEmulator } from "../packages/emulator-kit/dist/index.js";
import { emulator } from "../emulators/kubernetes/dist/index.js";
import { createKubernetesPlugin } from "../providers/kubernetes/dist/plugin.js";

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const RUNS = Number(arg("runs", "30"));
const OUT = arg("out", "bench/results");
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const scope = { driverKey: "kubernetes", companyId: "bench-co", environmentId: "env-bench" };

async function measure(latencyMs) {
  /** @type {any} the emulator's cluster, handed over by `expose` */
  let cluster;
  const emu = await runEmulator(emulator, { options: { expose: (c) => (cluster = c) } });
  const host = await fs.mkdtemp(path.join(os.tmpdir(), "k8s-bench-"));
  try {
    const { definition } = createKubernetesPlugin();
    await definition.setup(/** @type {any} a stub context: setup only logs */ ({ execution: { log() {} }, logger: { info() {}, warn() {}, error() {}, debug() {} } }));
    const config = { kubeconfig: emu.credentials.kubeconfig, timeoutMs: 60_000, readyTimeoutSec: 60 };
    if (latencyMs > 0) emu.faults.inject({ kind: "latency", ms: latencyMs, route: "*", times: 1_000_000 });
    const rows = {};
    const record = async (name, fn, n) => {
      const times = [];
      const calls = [];
      for (let i = 0; i < n; i++) {
        await emu.requests.idle();
        const mark = emu.requests.mark();
        const t0 = performance.now();
        await fn(i);
        times.push(performance.now() - t0);
        await emu.requests.idle();
        calls.push(emu.requests.list({ since: mark }).length);
      }
      rows[name] = { medianMs: +median(times).toFixed(2), apiRequests: median(calls), runs: n };
    };
    // First acquire makes the tenant; later ones reuse it (one worker).
    /** @type {any} */
    let lease;
    await record(
      "acquire (first, with tenant)",
      async () => {
        lease = await definition.onEnvironmentAcquireLease({ ...scope, config, runId: "r0", adapterType: "claude_local" });
      },
      1,
    );
    const extra = [];
    await record(
      "acquire (tenant ready)",
      async (i) => {
        extra.push(await definition.onEnvironmentAcquireLease({ ...scope, config, runId: `r${i + 1}`, adapterType: "claude_local" }));
      },
      Math.max(3, Math.floor(RUNS / 6)),
    );
    const exec = (command, args) => definition.onEnvironmentExecute({ ...scope, config, lease, command, args });
    await record("execute `true`", () => exec("true", []), RUNS);
    await record("execute 64 KiB stdout", () => exec("head", ["-c", "65536", "/dev/zero"]), RUNS);
    const src = path.join(host, "src");
    await fs.mkdir(src, { recursive: true });
    for (let i = 0; i < 10; i++) await fs.writeFile(path.join(src, `f${i}.txt`), `file ${i}\n`.repeat(100));
    await record(
      "syncIn (10-file tree)",
      (i) => definition.onEnvironmentSyncIn({ ...scope, config, lease, operations: [{ operationId: `in-${i}`, files: [{ sourcePath: src, targetPath: "/workspace/bench", kind: "directory" }] }] }),
      Math.max(5, Math.floor(RUNS / 3)),
    );
    await record(
      "syncOut (10-file tree)",
      (i) =>
        definition.onEnvironmentSyncOut({
          ...scope,
          config,
          lease,
          operations: [{ operationId: `out-${i}`, files: [{ sourcePath: "/workspace/bench", targetPath: path.join(host, `back-${i}`), kind: "directory" }] }],
        }),
      Math.max(5, Math.floor(RUNS / 3)),
    );
    // Baseline: the jail's own runner, no API in between.
    const [ns, , name] = lease.providerLeaseId.slice(4).split("/");
    const pod = cluster.store.get(cluster.type("", "pods"), ns, name);
    const jail = cluster.kubelet.sandboxOf(pod);
    const baseline = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      await jail.runner.run("true", {});
      baseline.push(performance.now() - t0);
    }
    rows["baseline: jail runner `true`"] = { medianMs: +median(baseline).toFixed(2), apiRequests: 0, runs: RUNS };
    await record(
      "release (confirmed gone)",
      (i) => definition.onEnvironmentReleaseLease({ ...scope, config, providerLeaseId: (i === 0 ? lease : extra[i - 1]).providerLeaseId, leaseMetadata: (i === 0 ? lease : extra[i - 1]).metadata }),
      extra.length + 1,
    );
    return rows;
  } finally {
    emu.faults.clear();
    // Calls the emulator did not serve (no route, UNIMPLEMENTED, refused): a missing route shows here.
    const unserved = emu.requests.unserved();
    console.log(`unserved calls: ${unserved.length ? unserved.map((u) => `${u.count}x ${u.method} ${u.target} (${u.reason})`).join(", ") : "none"}`);
    await emu.close();
    await fs.rm(host, { recursive: true, force: true });
  }
}

const results = {};
for (const latency of [0, 40]) results[`${latency}ms`] = await measure(latency);
console.log(`kubernetes provider vs the test server (${RUNS} runs; medians)`);
console.log(["operation".padEnd(32), "0 ms: ms".padStart(10), "calls".padStart(6), "40 ms: ms".padStart(11), "calls".padStart(6)].join(" "));
for (const name of Object.keys(results["0ms"])) {
  const a = results["0ms"][name];
  const b = results["40ms"][name];
  console.log([name.padEnd(32), String(a.medianMs).padStart(10), String(a.apiRequests).padStart(6), String(b.medianMs).padStart(11), String(b.apiRequests).padStart(6)].join(" "));
}
const ratio = results["0ms"]["execute `true`"].medianMs / results["0ms"]["baseline: jail runner `true`"].medianMs;
console.log(`execute vs jail runner (0 ms): ${ratio.toFixed(2)}x`);
await fs.mkdir(OUT, { recursive: true });
const file = path.join(OUT, `kubernetes-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
await fs.writeFile(file, JSON.stringify({ node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), runs: RUNS, results, ratio }, null, 2));
console.log(`report: ${file}`);
