#!/usr/bin/env node
// Drives the running Paperclip server through its HTTP API: for each install mode in turn (by package name
// from the local registry, by local path) installs our plugins, then for each provider runs probes, config
// refusals and claude_local task runs with the fake CLI, and checks the results on the host; by name also
// upgrades each plugin over the API and runs on the environment made before. Between modes the plugins are
// uninstalled. Started by run.sh, which owns the server's and the registry's lifecycle. Prints a report;
// exit 1 on failure.
//
// env: E2E_API            http://127.0.0.1:3100/api
//      E2E_RUN_DIR        scratch dir of this run (server data under $E2E_RUN_DIR/data)
//      E2E_PLUGINS        lines "<pluginKey>\t<copied package dir>\t<repo-relative dir>"
//      E2E_FAKE_COMMAND   absolute path of the fake Claude CLI, visible inside every sandbox
//      E2E_SERVER_PID     pid of the server (its process tree is not a leftover)
//      E2E_SERVER_LOG     server stdout/stderr file
//      E2E_CALLS_DIR      where the call recorder writes <pluginKey>.ndjson ("" = no recorder)
//      E2E_ONLY           optional comma list of driver keys to run
//      E2E_PROVIDERS_MODULE  optional module exporting PROVIDERS (default ./providers.mjs)
//      E2E_OUT_DIR        kept output of the run (browser screenshots under ui/); default $E2E_RUN_DIR/out
//      E2E_UI             1 (default): the browser test of the host's environment form (ui.mjs); 0: skip it
//      E2E_CHROMIUM       the browser (default /usr/bin/chromium, Debian's chromium package)
//      E2E_INSTALL        install modes in order, comma list of name|path (default path)
//      E2E_REGISTRY_URL   the local registry holding our packages (by name; the server user's npm points at it)
//      E2E_REPO           the repository (package names and versions of the providers' dirs)
//      E2E_EMULATOR_LATENCY_MS  optional delay each hosted provider's emulator adds before every vendor
//                         call (its latency fault on every route), to time runs at a vendor's distance
//      E2E_TIMING_RUNS    optional: timed runs per provider instead of its timingRuns
//      E2E_ACP_POLL       1: after a provider's scenarios (install by path), the ACP task again on a copy of
//                         the plugin whose manifest leaves incrementalSessionOutput out (the host's output-file
//                         poll), for the stream vs poll figure of HOST-CALLS.md §9; off by default
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { execFileSync } from "node:child_process";
import { createUiSession } from "./ui.mjs";
import { upgradeVersionOf } from "./registry.mjs";

const env = process.env;
const API = env.E2E_API ?? "http://127.0.0.1:3100/api";
const RUN_DIR = env.E2E_RUN_DIR;
const DATA_DIR = path.join(RUN_DIR, "data");
const FAKE = env.E2E_FAKE_COMMAND;
const FAKE_ACP = env.E2E_FAKE_ACP_COMMAND ?? "";
const SERVER_PID = Number(env.E2E_SERVER_PID);
const CALLS_DIR = env.E2E_CALLS_DIR ?? "";
const { PROVIDERS } = await import(env.E2E_PROVIDERS_MODULE ? pathToFileURL(path.resolve(env.E2E_PROVIDERS_MODULE)).href : "./providers.mjs");
const only = (env.E2E_ONLY ?? "")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
const EMULATOR_LATENCY_MS = Number(env.E2E_EMULATOR_LATENCY_MS ?? 0);
const TIMING_RUNS = env.E2E_TIMING_RUNS === undefined ? undefined : Number(env.E2E_TIMING_RUNS);
const pluginRows = (env.E2E_PLUGINS ?? "")
  .split("\n")
  .filter(Boolean)
  .map((l) => {
    const [key, dir, repoDir] = l.split("\t");
    return { key, dir, repoDir };
  });
const ctx = { runDir: RUN_DIR, dataDir: DATA_DIR };
const INSTALL_MODES = (env.E2E_INSTALL ?? "path")
  .split(",")
  .map((s) => s.trim())
  .filter(Boolean);
const REGISTRY_URL = env.E2E_REGISTRY_URL ?? "";
const REPO = env.E2E_REPO ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
// The host's managed plugin folder: plugin-loader's DEFAULT_LOCAL_PLUGIN_DIR, $HOME/.paperclip/plugins.
const PLUGIN_HOME = path.join(RUN_DIR, "home", ".paperclip", "plugins");
const OUT_DIR = env.E2E_OUT_DIR || path.join(RUN_DIR, "out");
const UI_ON = env.E2E_UI !== "0";
let ui = null; // the browser session (created in main when UI_ON)

// ---------------------------------------------------------------- helpers
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => Date.now();
const SECRETISH = /("?(?:[a-z_]*(?:token|secret|key|password|jwt|authorization)[a-z_]*)"?\s*[:=]\s*)("[^"]*"|[^\s,}]+)/gi;
const redactText = (s) =>
  String(s)
    .replace(/Bearer\s+[A-Za-z0-9._~+/=-]+/g, "Bearer <redacted>")
    .replace(SECRETISH, "$1<redacted>");

async function api(method, route, body, { timeoutMs = 30_000 } = {}) {
  const res = await fetch(API + route, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}
async function apiOk(method, route, body, opts) {
  const r = await api(method, route, body, opts);
  if (r.status < 200 || r.status >= 300) throw new Error(`${method} ${route} -> HTTP ${r.status}: ${redactText(r.text).slice(0, 500)}`);
  return r.json;
}
async function waitFor(what, fn, { timeoutMs = 90_000, intervalMs = 100 } = {}) {
  const deadline = now() + timeoutMs;
  let last;
  while (now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
/**
 * A heartbeat run once it has finished (`onFinished` runs first, on the poll that saw it).
 * @param {string} what
 * @param {string} runId
 * @param {{ timeoutMs?: number, onFinished?: () => Promise<unknown> }} [options]
 */
function runFinished(what, runId, { timeoutMs = 90_000, onFinished } = {}) {
  return waitFor(
    what,
    async () => {
      const r = (await api("GET", `/heartbeat-runs/${runId}`)).json;
      if (!r?.finishedAt) return null;
      await onFinished?.();
      return r;
    },
    { timeoutMs },
  );
}
/**
 * Beside the worker-call recorder: every vendor call the provider's emulator saw (route, start, wall
 * time, messages; no headers, no bodies), one JSON line each, to `<CALLS_DIR>/<driverKey>.<mode>.emulator.ndjson`,
 * so a run's vendor calls can be laid against the host's calls (`bench/e2e-breakdown.mjs`).
 */
function dumpEmulatorRequests(driverKey, mode, emulator) {
  try {
    const lines = emulator.requests.list({ includeRunning: true }).map((r) =>
      JSON.stringify({
        id: r.id,
        protocol: r.protocol,
        method: r.method,
        route: r.route,
        status: r.status,
        code: r.code,
        startedAt: r.startedAt,
        latencyMs: r.latencyMs,
        done: r.done,
        messagesIn: r.messagesIn,
        messagesOut: r.messagesOut,
        bytesIn: r.bytesIn,
        bytesOut: r.bytesOut,
      }),
    );
    fs.writeFileSync(path.join(CALLS_DIR, `${driverKey}.${mode}.emulator.ndjson`), lines.length ? `${lines.join("\n")}\n` : "");
  } catch (err) {
    console.log(`[e2e] ${driverKey}: emulator requests not written: ${err.message}`);
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmtMs = (ms) => (ms === undefined ? "" : ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);

// ---------------------------------------------------------------- report
const rows = [];
const failures = [];
// recorded: the current plugin's worker is wrapped by the call recorder (installs by path only: a plugin
// the host installed by name runs exactly as the host installed it).
let current = { provider: "-", companyId: null, environmentIds: [], runIds: [], pluginKey: null, recorded: false };

async function step(name, fn) {
  const t0 = now();
  try {
    const out = (await fn()) ?? {};
    rows.push({ provider: current.provider, step: name, ok: true, ms: out.ms ?? now() - t0, detail: out.detail ?? "" });
    console.log(`  ok    ${name} (${fmtMs(out.ms ?? now() - t0)})${out.detail ? ` ${out.detail}` : ""}`);
    return out;
  } catch (err) {
    const message = redactText(err?.message ?? String(err));
    rows.push({ provider: current.provider, step: name, ok: false, ms: now() - t0, detail: message });
    console.log(`  FAIL  ${name}: ${message}`);
    failures.push({ ...current, step: name, message });
    await printDiagnostics(name).catch((e) => console.log(`  (diagnostics failed: ${e.message})`));
    return null;
  }
}
function check(cond, message) {
  if (!cond) throw new Error(message);
}

// ---------------------------------------------------------------- diagnostics
function serverLogTail(lines = 60) {
  try {
    const text = fs.readFileSync(env.E2E_SERVER_LOG, "utf8").replace(/\x1b\[[0-9;]*m/g, "");
    // Our own polling (successful GETs) would fill the tail: leave it out.
    return text
      .split("\n")
      .filter((l) => !l.includes("pendingMigrations") && !/INFO: GET \S+ [23]\d\d\b/.test(l))
      .slice(-lines)
      .map((l) => redactText(l).slice(0, 400));
  } catch {
    return ["(no server log)"];
  }
}
function callLines(pluginKey, last = 40) {
  if (!CALLS_DIR || !pluginKey || !current.recorded) return ["(call recorder off)"];
  let text;
  try {
    text = fs.readFileSync(path.join(CALLS_DIR, `${pluginKey}.ndjson`), "utf8");
  } catch {
    return ["(no calls recorded)"];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .slice(-last)
    .map((l) => {
      const e = JSON.parse(l);
      const p = e.params ?? {};
      if (e.dir === "call") {
        const what =
          e.method === "environmentExecute"
            ? `${p.command} ${JSON.stringify((p.args ?? []).join(" ").slice(0, 140))} cwd=${p.cwd ?? ""}`
            : /Sync(In|Out)/.test(e.method)
              ? (p.operations ?? []).flatMap((o) => (o.files ?? []).map((f) => `${f.sourcePath} -> ${f.targetPath}`)).join("; ")
              : (p.providerLeaseId ?? p.lease?.providerLeaseId ?? "");
        return `${e.t} -> ${e.method} #${e.id} ${what}`;
      }
      const r = e.error ? `ERROR ${JSON.stringify(e.error).slice(0, 300)}` : JSON.stringify(e.result ?? null).slice(0, 200);
      return `${e.t} <- ${e.method} #${e.id} ${e.ms} ms ${r}`;
    });
}
async function printDiagnostics(stepName) {
  console.log(`  ---- diagnostics for "${current.provider} / ${stepName}"`);
  console.log("  -- server log tail:");
  for (const l of serverLogTail()) console.log(`     ${l}`);
  console.log(`  -- plugin calls (recorder, last 40) for ${current.pluginKey ?? "?"}:`);
  for (const l of callLines(current.pluginKey)) console.log(`     ${redactText(l)}`);
  for (const eid of current.environmentIds.slice(-2)) {
    const leases = await api("GET", `/environments/${eid}/leases?companyId=${current.companyId}`).catch(() => null);
    console.log(`  -- leases of environment ${eid}:`);
    for (const l of Array.isArray(leases?.json) ? leases.json.slice(0, 6) : []) {
      console.log(
        `     ${l.providerLeaseId} status=${l.status} cleanup=${l.cleanupStatus} failure=${l.failureReason ?? ""} run=${l.heartbeatRunId ?? ""} acquisition=${l.metadata?.sandboxLeaseAcquisition?.outcome ?? ""}`,
      );
    }
  }
  for (const rid of current.runIds.slice(-1)) {
    const run = await api("GET", `/heartbeat-runs/${rid}`).catch(() => null);
    console.log(`  -- heartbeat run ${rid}: status=${run?.json?.status} error=${redactText(JSON.stringify(run?.json?.error ?? null)).slice(0, 300)}`);
    const log = await api("GET", `/heartbeat-runs/${rid}/log`).catch(() => null);
    const chunks = String(log?.json?.content ?? "")
      .split("\n")
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l).chunk;
        } catch {
          return l;
        }
      })
      .join("")
      .split("\n")
      .filter(Boolean)
      .slice(-25);
    for (const c of chunks) console.log(`     ${redactText(c).slice(0, 300)}`);
  }
  console.log("  ----");
}

/** The run's log as plain text (the route returns NDJSON records with a `chunk` each). */
async function runLogText(runId) {
  const log = await api("GET", `/heartbeat-runs/${runId}/log`).catch(() => null);
  return String(log?.json?.content ?? "")
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l).chunk ?? "";
      } catch {
        return l;
      }
    })
    .join("");
}

// ---------------------------------------------------------------- host-side checks
function procInfo(pid) {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
    const state = /^State:\s+(\S)/m.exec(status)?.[1];
    const ppid = Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const start = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
    let environ = "";
    try {
      environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8");
    } catch {
      /* gone or denied */
    }
    let cwd = "";
    try {
      cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      /* gone */
    }
    let exe = "";
    try {
      exe = fs.readlinkSync(`/proc/${pid}/exe`);
    } catch {
      /* gone */
    }
    return { pid, uid, state, ppid, start, cmdline, environ, cwd, exe };
  } catch {
    return null;
  }
}
const serverStart = procInfo(SERVER_PID)?.start ?? 0;
const pluginIds = new Set();
/**
 * Processes of this server's sandboxes that are still alive: owned by the server user, started after
 * the server, not the server, its Postgres or a plugin worker, and tied to this run (a descendant of
 * the server, or naming our run dir / a lease dir / a plugin id of ours in its argv, env or cwd).
 */
function leftoverProcesses(extraPaths = []) {
  const procs = fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .map(procInfo)
    .filter(Boolean);
  const byPid = new Map(procs.map((p) => [p.pid, p]));
  const isDescendant = (p) => {
    for (let q = p, i = 0; q && i < 64; q = byPid.get(q.ppid), i++) if (q.ppid === SERVER_PID) return true;
    return false;
  };
  const markers = [RUN_DIR, ...extraPaths, ...[...pluginIds].map((id) => `PAPERCLIP_PLUGIN_ID=${id}`)];
  return procs.filter((p) => {
    if (p.uid !== 65534 || p.state === "Z" || p.pid === SERVER_PID || p.start < serverStart) return false;
    if (p.exe.includes("postgres") || /^postgres:/.test(p.cmdline)) return false;
    if (p.ppid === SERVER_PID && /\/dist\/[^ ]*worker[^ ]*\.js/.test(p.cmdline)) return false; // a plugin worker
    const blob = `${p.cmdline}\n${p.environ}\n${p.cwd}`;
    return isDescendant(p) || markers.some((m) => blob.includes(m));
  });
}
function recordedCalls(pluginKey) {
  if (!CALLS_DIR || !current.recorded) return null;
  try {
    return fs
      .readFileSync(path.join(CALLS_DIR, `${pluginKey}.ndjson`), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}
async function leasesOf(eid) {
  return (await apiOk("GET", `/environments/${eid}/leases?companyId=${current.companyId}`)) ?? [];
}

// ---------------------------------------------------------------- one task run
/**
 * Assign a new issue to the agent and wait until the run's lease is released, then check the issue is done
 * and the heartbeat run finished. Returns timings and the records to check.
 *
 * Timing: t0 is taken just before the assignment POST; "done" and "released" are the server's own
 * timestamps (issue.completedAt, lease.releasedAt; same machine clock), so polling granularity adds nothing.
 * While the run is live we poll only the environment's lease list (~6 ms on the server). GET /issues/:id
 * costs the single-threaded server ~50 ms per call; polling it every 100 ms took a third of the server's time
 * from the very run being measured.
 */
async function taskRun({ agentId, environmentId }) {
  const runsBefore = new Set((await leasesOf(environmentId)).map((l) => l.heartbeatRunId).filter(Boolean));
  const t0 = now();
  const created = await apiOk("POST", `/companies/${current.companyId}/issues`, {
    title: `e2e task ${new Date().toISOString()}`,
    description: "Write a file in the workspace, comment on this issue, then mark it done.",
    assigneeAgentId: agentId,
    status: "todo",
  });
  const issueId = created.id;
  // Fail fast when the agent's run already failed (e.g. the acquire threw) instead of waiting for a timeout.
  const failFast = async () => {
    const runs = (await api("GET", `/companies/${current.companyId}/heartbeat-runs`)).json;
    const list = Array.isArray(runs) ? runs : (runs?.runs ?? []);
    const bad = list.find((r) => r.agentId === agentId && Date.parse(r.createdAt ?? r.startedAt ?? 0) >= t0 - 1000 && ["failed", "cancelled", "timed_out"].includes(r.status));
    if (bad) {
      current.runIds.push(bad.id);
      throw new Error(`heartbeat run ${bad.id} ${bad.status}: ${redactText(JSON.stringify(bad.error ?? "")).slice(0, 400)}`);
    }
  };
  // The run's lease: the first lease row of this environment bound to a new heartbeat run.
  let polls = 0;
  const lease0 = await waitFor(
    "the run's lease",
    async () => {
      const l = (await leasesOf(environmentId)).find((x) => x.heartbeatRunId && !runsBefore.has(x.heartbeatRunId) && x.issueId === issueId);
      if (!l && ++polls % 10 === 0) await failFast();
      return l ?? null;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  const runId = lease0.heartbeatRunId;
  current.runIds.push(runId);
  const lease = await waitFor(
    "lease released",
    async () => {
      const l = (await leasesOf(environmentId)).find((x) => x.id === lease0.id);
      if (l?.status === "released" && l.releasedAt) return l;
      if (++polls % 10 === 0) await failFast();
      return null;
    },
    { timeoutMs: 90_000, intervalMs: 100 },
  );
  const run = await runFinished("heartbeat run finished", runId, { timeoutMs: 30_000 });
  const issue = await apiOk("GET", `/issues/${issueId}`);
  check(issue?.status === "done" && issue.completedAt, `issue ${issueId} is ${issue?.status} after its run's lease was released`);
  return {
    issueId,
    runId,
    run,
    issue,
    lease,
    toAcquireMs: Date.parse(lease.acquiredAt ?? lease.createdAt) - t0,
    toDoneMs: Date.parse(issue.completedAt) - t0,
    toReleaseMs: Date.parse(lease.releasedAt) - t0,
  };
}

/**
 * `closedBySibling`: another run on the same issue (the host's recovery starts one beside its own
 * follow-up run now and then) finished the issue first, so the host refuses this run's comment and
 * done with 409. Everything the sandbox did must still hold; only that one API answer may be 409.
 * @param {unknown} _p the provider entry (unused here)
 * @param {any} r
 * @param {{ expectMarkerBefore?: string, expectKeeper?: string, closedBySibling?: boolean }} [expect]
 */
async function checkRunResult(_p, r, { expectMarkerBefore, expectKeeper, closedBySibling = false } = {}) {
  check(r.run.status === "succeeded", `heartbeat run ${r.runId} status ${r.run.status} ${redactText(JSON.stringify(r.run.error ?? ""))}`);
  const comments = await apiOk("GET", `/issues/${r.issueId}/comments`);
  const list = Array.isArray(comments) ? comments : (comments?.comments ?? []);
  const mine = list.find((c) => String(c.body ?? "").includes(`e2e-fake-claude run=${r.runId}`));
  check(mine || closedBySibling, `no comment from the fake agent for run ${r.runId} (${list.length} comments)`);
  // Files written in the sandbox workspace came back to the host workspace.
  const hostWs = r.lease.metadata?.workspaceRealization?.local?.path ?? path.join(DATA_DIR, "instances/default/workspaces", r.run.agentId);
  const out = path.join(hostWs, `E2E_AGENT_OUTPUT_${r.runId}.txt`);
  const nested = path.join(hostWs, "e2e-out", `nested-${r.runId}.txt`);
  check(fs.existsSync(out), `agent output file did not come back to the host workspace: ${out}`);
  check(fs.existsSync(nested), `nested agent file did not come back: ${nested}`);
  const text = fs.readFileSync(out, "utf8");
  // The run's one PATCH (done with its comment) refused as a whole, and nothing else.
  const refusedBySibling = closedBySibling && !mine && /comment_http=409 done_http=409\b/.test(text);
  check(
    refusedBySibling || (/comment_http=(200|201)\b/.test(text) && /done_http=(200|kept_open)\b/.test(text)),
    `fake agent API calls failed: ${text
      .split("\n")
      .filter((l) => /http/.test(l))
      .join(" ")}`,
  );
  const markerBefore = /marker_before=(.*)/.exec(text)?.[1]?.trim();
  if (expectMarkerBefore !== undefined) {
    check(markerBefore === expectMarkerBefore, `file outside the workspace: expected marker_before=${expectMarkerBefore}, got ${markerBefore}`);
  }
  const keeperAlive = /keeper_alive=(.*)/.exec(text)?.[1]?.trim();
  if (expectKeeper !== undefined) check(keeperAlive === expectKeeper, `process kept by the lease: expected keeper_alive=${expectKeeper}, got ${keeperAlive}`);
  return { hostWs, markerBefore, keeperAlive };
}

async function checkReleased(p, r, { statuses = ["released"] } = {}) {
  check(statuses.includes(r.lease.status), `lease status ${r.lease.status} (expected ${statuses.join("|")})`);
  check(r.lease.cleanupStatus === "success" || r.lease.cleanupStatus == null, `lease cleanupStatus ${r.lease.cleanupStatus} ${r.lease.failureReason ?? ""}`);
  const calls = recordedCalls(current.pluginKey);
  if (calls) {
    const rel = calls.find((c) => c.dir === "call" && /environment(Release|Destroy)Lease/.test(c.method) && c.params?.providerLeaseId === r.lease.providerLeaseId);
    check(rel, `no releaseLease/destroyLease call recorded for ${r.lease.providerLeaseId}`);
    const reply = calls.find((c) => c.dir === "reply" && c.id === rel.id && c.method === rel.method);
    check(reply && !reply.error, `release of ${r.lease.providerLeaseId} failed: ${JSON.stringify(reply?.error ?? "no reply")}`);
  }
  const dir = p.leaseDir?.(ctx, r.lease);
  // Release returns before every trace is gone (e.g. a jail's monitor exiting); allow a short grace.
  await waitFor(
    "sandbox directory and processes gone",
    async () => {
      return (!dir || !fs.existsSync(dir)) && leftoverProcesses(dir ? [dir] : []).length === 0;
    },
    { timeoutMs: 5_000, intervalMs: 100 },
  ).catch(() => {
    const procs = leftoverProcesses(dir ? [dir] : []);
    throw new Error(
      [dir && fs.existsSync(dir) ? `lease dir still exists: ${dir}` : "", procs.length ? `sandbox processes left: ${procs.map((q) => `${q.pid} ${q.cmdline.slice(0, 120)}`).join(" | ")}` : ""]
        .filter(Boolean)
        .join("; "),
    );
  });
}

// ---------------------------------------------------------------- scenario per provider
/** Environment and project names are unique per instance: one set per install mode. */
const instanceName = (p, suffix = "") => `e2e-${p.driverKey}${ctx.installMode && ctx.installMode !== INSTALL_MODES[0] ? `-${ctx.installMode}` : ""}${suffix}`;
async function runProvider(p, plugin) {
  current = { provider: `${p.driverKey} (by ${plugin.mode})`, companyId: null, environmentIds: [], runIds: [], pluginKey: plugin.key, recorded: plugin.mode === "path" };
  console.log(`\n== ${p.driverKey} (${plugin.key}, installed by ${plugin.mode})`);
  p.prepare?.(ctx);
  const baseConfig = { provider: p.driverKey, ...p.config(ctx) };

  const company = await step("create company", async () => {
    const c = await apiOk("POST", "/companies", { name: `e2e ${p.driverKey} ${Date.now()}` });
    current.companyId = c.id;
    const caps = await apiOk("GET", `/companies/${c.id}/environments/capabilities`);
    const claude = (caps.adapters ?? []).find((a) => a.adapterType === "claude_local");
    check(claude?.sandboxProviders?.[p.driverKey] === "supported", `driver ${p.driverKey} not offered for claude_local: ${JSON.stringify(claude?.sandboxProviders)}`);
    return { detail: "driver listed for claude_local" };
  });
  if (!company) return;
  const cid = current.companyId;

  const envRes = await step("create sandbox environment", async () => {
    const e = await apiOk("POST", `/companies/${cid}/environments`, { name: instanceName(p), driver: "sandbox", config: baseConfig });
    current.environmentIds.push(e.id);
    return { env: e };
  });
  if (!envRes) return;
  const eid = envRes.env.id;

  await step("saved probe", async () => {
    const r = await apiOk("POST", `/environments/${eid}/probe?companyId=${cid}`, {}, { timeoutMs: 130_000 });
    check(r.ok === true, `probe not ok: ${redactText(JSON.stringify(r)).slice(0, 400)}`);
    return { detail: r.summary ?? "" };
  });
  await step("unsaved probe-config", async () => {
    const r = await apiOk("POST", `/companies/${cid}/environments/probe-config`, { driver: "sandbox", config: baseConfig }, { timeoutMs: 130_000 });
    check(r.ok === true, `probe-config not ok: ${redactText(JSON.stringify(r)).slice(0, 400)}`);
    return { detail: r.summary ?? "" };
  });
  if (p.invalidConfig) {
    await step("invalid config refused (4xx)", async () => {
      const r = await api("POST", `/companies/${cid}/environments`, { name: instanceName(p, "-invalid"), driver: "sandbox", config: { ...baseConfig, ...p.invalidConfig.config } });
      if (r.status >= 200 && r.status < 300 && r.json?.id) current.environmentIds.push(r.json.id);
      check(r.status >= 400 && r.status < 500, `expected HTTP 4xx, got ${r.status}: ${redactText(r.text).slice(0, 300)}`);
      check(p.invalidConfig.error.test(r.text), `error does not carry the plugin's message (${p.invalidConfig.error}): ${redactText(r.text).slice(0, 300)}`);
      return { detail: `HTTP ${r.status} ${redactText(r.json?.error ?? r.json?.message ?? r.text).slice(0, 160)}` };
    });
  }
  if (p.missingBackend) {
    await step("missing backend: probe-config fails with diagnostic", async () => {
      const r = await api("POST", `/companies/${cid}/environments/probe-config`, { driver: "sandbox", config: { ...baseConfig, ...p.missingBackend.config } }, { timeoutMs: 130_000 });
      check(r.json?.ok !== true, `probe-config unexpectedly ok: ${redactText(r.text).slice(0, 300)}`);
      check(p.missingBackend.diagnostic.test(r.text), `no plugin diagnostic matching ${p.missingBackend.diagnostic}: HTTP ${r.status} ${redactText(r.text).slice(0, 300)}`);
      const diags = r.json?.details?.diagnostics ?? [];
      const diag = diags.find((d) => d.severity === "error" && p.missingBackend.diagnostic.test(d.message))?.message ?? r.json?.summary ?? r.json?.error ?? r.text;
      return { detail: `HTTP ${r.status} ${redactText(diag).slice(0, 160)}` };
    });
    await step("missing backend: saved probe fails with diagnostic", async () => {
      const r = await api("POST", `/companies/${cid}/environments`, { name: instanceName(p, "-nobackend"), driver: "sandbox", config: { ...baseConfig, ...p.missingBackend.config } });
      if (r.status >= 400 && r.status < 500) {
        // Refused at save time is also a plugin diagnostic, as long as it names the problem.
        check(p.missingBackend.diagnostic.test(r.text), `save refused without the diagnostic: ${redactText(r.text).slice(0, 300)}`);
        return { detail: `refused at save: HTTP ${r.status}` };
      }
      check(r.status < 300 && r.json?.id, `create failed: HTTP ${r.status} ${redactText(r.text).slice(0, 300)}`);
      current.environmentIds.push(r.json.id);
      const pr = await api("POST", `/environments/${r.json.id}/probe?companyId=${cid}`, {}, { timeoutMs: 130_000 });
      check(pr.json?.ok !== true, `saved probe unexpectedly ok: ${redactText(pr.text).slice(0, 300)}`);
      check(p.missingBackend.diagnostic.test(pr.text), `no plugin diagnostic matching ${p.missingBackend.diagnostic}: HTTP ${pr.status} ${redactText(pr.text).slice(0, 300)}`);
      return { detail: `HTTP ${pr.status} ${redactText(pr.json?.details?.error ?? pr.json?.summary ?? pr.json?.error ?? "").slice(0, 160)}` };
    });
  }

  if (ui && p.ui) {
    const caps = await apiOk("GET", `/companies/${cid}/environments/capabilities`).catch(() => null);
    const driver = caps?.sandboxProviders?.[p.driverKey];
    p.ui = typeof p.ui === "function" ? p.ui(ctx) : p.ui;
    await ui.scenario(p, {
      step,
      companyId: cid,
      schema: driver?.configSchema,
      driverDescription: driver?.description,
      onEnvironment: (id) => current.environmentIds.push(id),
    });
  }

  const agentRes = await step("create claude_local agent (fake CLI)", async () => {
    const a = await apiOk("POST", `/companies/${cid}/agents`, {
      name: `FakeClaude-${p.driverKey}`,
      role: "engineer",
      adapterType: "claude_local",
      defaultEnvironmentId: eid,
      adapterConfig: { engine: "cli", command: FAKE, model: "claude-sonnet-4-6", timeoutSec: 120 },
    });
    return { agent: a };
  });
  if (!agentRes) return;
  const agentId = agentRes.agent.id;

  let first;
  await step("task run: assignment -> done", async () => {
    first = await taskRun({ agentId, environmentId: eid });
    return { ms: first.toDoneMs, detail: `run ${first.runId}` };
  });
  if (first) {
    await step("task run: assignment -> lease released", async () => ({ ms: first.toReleaseMs, detail: `lease ${first.lease.providerLeaseId}` }));
    await step("task run: comment, done, files back on host", async () => {
      const res = await checkRunResult(p, first);
      return { detail: `workspace ${path.relative(DATA_DIR, res.hostWs)}` };
    });
    await step("task run: lease released, no sandbox dir/process left", async () => {
      await checkReleased(p, first);
    });
  }

  const timingRuns = p.timingRuns > 0 ? (TIMING_RUNS ?? p.timingRuns) : 0;
  if (timingRuns > 0 && first) {
    const samples = [];
    for (let i = 0; i < timingRuns; i++) {
      const ok = await step(`timing run ${i + 1}/${timingRuns}`, async () => {
        const r = await taskRun({ agentId, environmentId: eid });
        await checkRunResult(p, r);
        await checkReleased(p, r);
        samples.push(r.toReleaseMs);
        return { ms: r.toReleaseMs, detail: `acquired ${fmtMs(r.toAcquireMs)}, done ${fmtMs(r.toDoneMs)}, released ${fmtMs(r.toReleaseMs)}; lease ${r.lease.providerLeaseId}` };
      });
      if (!ok) break;
    }
    if (samples.length === timingRuns) {
      const m = median(samples);
      const note = p.targetMs ? (m < p.targetMs ? `meets target < ${fmtMs(p.targetMs)}` : `MISSES target < ${fmtMs(p.targetMs)}`) : "";
      rows.push({ provider: current.provider, step: `median assignment -> lease release (${samples.length} runs)`, ok: true, ms: m, detail: note });
      console.log(`  info  median assignment -> lease release: ${fmtMs(m)} ${note}`);
    }
  }

  if (p.duplex && first) await duplexScenario(p, agentId, eid);
  if (p.acp && FAKE_ACP && first) await acpScenario(p, cid, eid);
  await loginScenario(p, cid, eid);
  if (p.customImage && first) await customImageScenario(p, cid, agentId, eid);
  if (p.reuse) await reuseScenario(p, cid, baseConfig);
  if (plugin.mode === "name" && first) await upgradeScenario(p, plugin, { agentId, eid, cid });
  if (env.E2E_ACP_POLL === "1" && p.acp && FAKE_ACP && first && plugin.mode === "path") await acpPollScenario(p, plugin, cid, baseConfig);

  await step("no leftovers after scenario", async () => {
    // A sandbox process killed by the last release may still be exiting (its cmdline already empty):
    // give the kernel a few seconds before calling it a leftover.
    let extra = [];
    let procs = [];
    await waitFor(
      "leftovers to clear",
      async () => {
        extra = (await p.leftovers?.(ctx)) ?? [];
        procs = leftoverProcesses();
        return extra.length === 0 && procs.length === 0;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    ).catch(() => {});
    const describe = (q) => `process ${q.pid} (state ${q.state}, ppid ${q.ppid}${q.exe ? `, ${q.exe}` : ""}) ${q.cmdline.slice(0, 120)}`;
    check(extra.length === 0 && procs.length === 0, [...extra, ...procs.map(describe)].join("; "));
  });
}

/**
 * Custom images through the host's API (HOST-CALLS.md §8): a setup session started, a file installed
 * in the setup sandbox, captured ("finish"), the setup sandbox gone, a new run that finds the file
 * (the fake agent reports the $HOME marker it found), the template deleted with the provider's copy,
 * and a run after that starting clean.
 */
async function customImageScenario(p, cid, agentId, eid) {
  // With more than one company on the instance the host needs the company named (HOST-CALLS.md §8).
  const q = `companyId=${encodeURIComponent(cid)}`;
  const token = `e2e-template-${Date.now()}`;
  const started = await step("custom image: setup session started", async () => {
    const r = await apiOk("POST", `/environments/${eid}/custom-image-setup-sessions?${q}`, {}, { timeoutMs: 130_000 });
    check(r.session?.status === "waiting_for_user", `setup session is ${r.session?.status}: ${redactText(JSON.stringify(r.session ?? r)).slice(0, 300)}`);
    check(r.session.providerLeaseId, "the setup session names no sandbox");
    const got = await apiOk("GET", `/environment-custom-image-setup-sessions/${r.session.id}?${q}`);
    check(got.session?.status === "waiting_for_user", `refreshed setup session is ${got.session?.status}`);
    return {
      session: r.session,
      detail: `session ${r.session.id}, sandbox ${r.session.providerLeaseId}, connection ${r.connectionPayload?.type ?? "none"} (its command carries a credential: not printed)`,
    };
  });
  if (!started) return;
  const { session } = started;
  const installed = p.customImage.install
    ? await step("custom image: a file installed in the setup sandbox", async () => {
        await p.customImage.install(ctx, session.providerLeaseId, ".paperclip-e2e-marker", `${token}\n`);
        return { detail: "$HOME/.paperclip-e2e-marker" };
      })
    : await step("custom image: a file installed through the host's browser terminal", async () => {
        const seen = await terminalInstall(session.id, q, token);
        return { detail: `$HOME/.paperclip-e2e-marker typed over ${seen}` };
      });
  if (!installed) {
    await api("POST", `/environment-custom-image-setup-sessions/${session.id}/cancel?${q}`, { reason: "e2e install failed" });
    return;
  }
  const captured = await step("custom image: captured, setup sandbox gone", async () => {
    const r = await apiOk("POST", `/environment-custom-image-setup-sessions/${session.id}/finish?${q}`, {}, { timeoutMs: 130_000 });
    check(r.session?.status === "promoted", `setup session is ${r.session?.status} after finish`);
    check(r.template?.status === "active" && r.template.templateRef, `no active template: ${redactText(JSON.stringify(r.template ?? r)).slice(0, 300)}`);
    check((await p.customImage.templates(ctx)).includes(r.template.templateRef), `the provider keeps no template ${r.template.templateRef}`);
    const dir = p.leaseDir?.(ctx, { providerLeaseId: session.providerLeaseId });
    await waitFor("the setup sandbox gone", async () => !dir || !fs.existsSync(dir), { timeoutMs: 30_000 });
    return { template: r.template, detail: `template ${r.template.templateRef} (${r.template.templateKind})` };
  });
  if (!captured) return;
  await step("custom image: a new run starts from the template", async () => {
    const r = await taskRun({ agentId, environmentId: eid });
    await checkRunResult(p, r, { expectMarkerBefore: token });
    await checkReleased(p, r);
    return { ms: r.toReleaseMs, detail: `marker_before=${token}` };
  });
  await step("custom image: template deleted, its copy gone, the next run clean", async () => {
    const t = await apiOk("DELETE", `/environments/${eid}/custom-image-template?deleteProviderTemplate=true&${q}`);
    check(t.status === "revoked", `template is ${t.status} after delete`);
    check(!(await p.customImage.templates(ctx)).includes(captured.template.templateRef), `the provider still keeps ${captured.template.templateRef}`);
    const r = await taskRun({ agentId, environmentId: eid });
    await checkRunResult(p, r, { expectMarkerBefore: "none" });
    await checkReleased(p, r);
    return { detail: "marker_before=none" };
  });
}

/**
 * The operator's way into a setup sandbox (HOST-CALLS.md §8): a terminal-session token from the host,
 * then the host's terminal websocket, which connects to the setup session's `ssh` payload with ssh2
 * and relays the shell. Types the install, checks a resize reaches the terminal, exits the shell.
 */
async function terminalInstall(sessionId, q, token) {
  const minted = await apiOk("POST", `/environment-custom-image-setup-sessions/${sessionId}/terminal-session-token?${q}`, {});
  check(minted.connectionType === "ssh" && typeof minted.token === "string" && minted.websocketPath, `terminal token answer: ${redactText(JSON.stringify(minted)).slice(0, 300)}`);
  const url = `${API.replace(/^http/, "ws").replace(/\/api$/, "")}${minted.websocketPath}&cols=120&rows=30`;
  const ws = new WebSocket(url);
  const frames = [];
  let output = "";
  const waiters = [];
  const settle = () => {
    for (const w of [...waiters]) if (w.test()) waiters.splice(waiters.indexOf(w), 1), w.resolve();
  };
  ws.addEventListener("message", (event) => {
    let frame;
    try {
      frame = JSON.parse(String(event.data));
    } catch {
      frame = { type: "raw" };
    }
    frames.push(frame.type);
    if (frame.type === "output") output += frame.data;
    if (frame.type === "closed" || frame.type === "error") frames.push(`${frame.type}:${frame.reason ?? frame.message}`);
    settle();
  });
  ws.addEventListener("close", (event) => (frames.push(`ws-close:${event.code}`), settle()));
  const until = (what, test, timeoutMs = 60_000) =>
    new Promise((resolve, reject) => {
      if (test()) return resolve();
      const timer = setTimeout(() => reject(new Error(`terminal: timed out waiting for ${what}; frames ${frames.join(",")}; output ${JSON.stringify(output.slice(-300))}`)), timeoutMs);
      waiters.push({ test, resolve: () => (clearTimeout(timer), resolve()) });
    });
  try {
    await new Promise((resolve, reject) => {
      ws.addEventListener("open", resolve, { once: true });
      ws.addEventListener("error", () => reject(new Error("terminal websocket did not open")), { once: true });
    });
    const t0 = now();
    ws.send(JSON.stringify({ type: "auth", token: minted.token }));
    await until("ready", () => frames.includes("ready") || frames.some((f) => f.startsWith("error") || f.startsWith("ws-close")));
    check(frames.includes("ready"), `the terminal did not get ready: ${frames.join(",")}`);
    const readyMs = now() - t0;
    ws.send(JSON.stringify({ type: "input", data: `printf '%s\\n' ${token} > "$HOME/.paperclip-e2e-marker" && echo installed-$((6*7))\r` }));
    await until("the typed install to run", () => output.includes("installed-42"));
    ws.send(JSON.stringify({ type: "resize", cols: 100, rows: 20 }));
    ws.send(JSON.stringify({ type: "input", data: "echo size-$(stty size | tr ' ' x)\r" }));
    await until("the resized terminal's size", () => /size-20x100/.test(output));
    ws.send(JSON.stringify({ type: "input", data: "exit\r" }));
    await until("the terminal to close after exit", () => frames.some((f) => f.startsWith("closed") || f.startsWith("ws-close")));
    const types = [...new Set(frames)].join(",");
    return `the host's terminal (ready ${readyMs} ms; frames ${types})`;
  } finally {
    ws.close();
  }
}

/**
 * The host's agent logins on a login pseudo-terminal, for a provider whose driver declares
 * `supportsLoginPty` (HOST-CALLS.md §7): the Codex device login (`codex login --device-auth`: prompt
 * shown to the operator, `auth.json` read back from the session home, the host's CODEX_HOME secret
 * made) and the Claude setup-token login (`claude setup-token`: sign-in URL shown, the browser code
 * the operator submits typed into the terminal and echoed, the token parsed from the terminal and
 * stored). Each runs in a fresh lease the host deletes afterwards. The fake CLIs (fake-login.sh) are
 * installed as /usr/local/bin/{claude,codex} by run.sh.
 */
async function loginScenario(p, cid, eid) {
  const caps = await apiOk("GET", `/companies/${cid}/environments/capabilities`).catch(() => null);
  if (caps?.sandboxProviders?.[p.driverKey]?.supportsLoginPty !== true) {
    // No PTY: the host must refuse the login up front, before any session row, lease or terminal.
    await step(`login terminal: ${p.driverKey} has none, the host refuses the login`, async () => {
      const before = new Set((await leasesOf(eid)).map((l) => l.id));
      const r = await api("POST", `/companies/${cid}/adapters/codex_local/login-sessions`, { environmentId: eid });
      check(
        r.status === 422 && JSON.stringify(r.json ?? {}).includes("codex_device_login_provider_unsupported"),
        `expected a 422 codex_device_login_provider_unsupported, got HTTP ${r.status}: ${redactText(r.text).slice(0, 300)}`,
      );
      const made = (await leasesOf(eid)).filter((l) => !before.has(l.id));
      check(made.length === 0, `the refused login still made ${made.length} lease(s)`);
      return { detail: `${p.driverKey} declares no supportsLoginPty: HTTP 422 codex_device_login_provider_unsupported, no lease` };
    });
    return;
  }
  if (env.E2E_FAKE_LOGIN !== "1") {
    rows.push({ provider: current.provider, step: "login terminal", ok: true, ms: 0, detail: "SKIPPED: the fake login CLIs could not be installed (see run.sh's log)" });
    return;
  }
  const terminal = ["authenticated", "failed", "timed_out", "cancelled"];
  const loginLeases = async (before) => (await leasesOf(eid)).filter((l) => !before.has(l.id) && !l.heartbeatRunId);
  /** The login lease is released, its sandbox and processes gone, and the worker saw the login calls. */
  const sandboxGone = async (before, key) => {
    const lease = await waitFor(
      "the login lease released",
      async () => {
        const l = (await loginLeases(before)).at(-1);
        return l && l.status === "released" && l.releasedAt ? l : null;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    check(lease.cleanupStatus === "success" || lease.cleanupStatus == null, `login lease cleanupStatus ${lease.cleanupStatus} ${lease.failureReason ?? ""}`);
    const dir = p.leaseDir?.(ctx, lease);
    await waitFor("the login sandbox gone", async () => (!dir || !fs.existsSync(dir)) && leftoverProcesses(dir ? [dir] : []).length === 0, { timeoutMs: 10_000, intervalMs: 100 }).catch(() => {
      throw new Error(
        `login sandbox left: ${dir && fs.existsSync(dir) ? dir : ""} ${leftoverProcesses(dir ? [dir] : [])
          .map((q) => q.cmdline.slice(0, 100))
          .join(" | ")}`,
      );
    });
    const extra = (await p.leftovers?.(ctx)) ?? [];
    check(extra.length === 0, `provider leftovers after the login: ${extra.join("; ")}`);
    const calls = recordedCalls(current.pluginKey);
    if (!calls) return { lease, detail: `lease ${lease.providerLeaseId}` };
    const mine = calls.filter((c) => c.params?.providerLeaseId === lease.providerLeaseId || c.params?.lease?.providerLeaseId === lease.providerLeaseId);
    const open = mine.find((c) => c.dir === "call" && c.method === "loginPtyOpen");
    check(open?.params?.loginCommandKey === key, `no loginPtyOpen with key ${key} recorded for the login lease`);
    const route = open.params.hostRouteId;
    check(
      calls.some((c) => c.dir === "call" && c.method === "loginPtyClose" && c.params?.hostRouteId === route),
      "the host never closed the login terminal",
    );
    check(
      calls.some((c) => c.dir === "notify" && c.method === "loginPty.exit" && c.params?.hostRouteId === route),
      "no loginPty.exit notification recorded",
    );
    check(
      mine.some((c) => c.dir === "call" && /environment(Release|Destroy)Lease/.test(c.method)),
      "the login lease was not released through the worker",
    );
    const output = calls
      .filter((c) => c.dir === "notify" && c.method === "loginPty.output" && c.params?.hostRouteId === route)
      .map((c) => c.params.chunk)
      .join("");
    return {
      lease,
      output,
      detail: `lease ${lease.providerLeaseId}, ${mine
        .filter((c) => c.dir === "call")
        .map((c) => c.method)
        .join(" ")}`,
    };
  };

  // ---- Codex device login
  let before = new Set((await leasesOf(eid)).map((l) => l.id));
  let sid;
  const codexShown = await step("login terminal: codex device login, prompt shown", async () => {
    const started = await apiOk("POST", `/companies/${cid}/adapters/codex_local/login-sessions`, { environmentId: eid });
    sid = started.sessionId;
    const shown = await waitFor(
      "the device prompt",
      async () => {
        const r = await apiOk("GET", `/companies/${cid}/adapters/codex_local/login-sessions/${sid}`);
        if (r.prompt) return r;
        if (terminal.includes(r.status)) throw new Error(`the login ended ${r.status} before a prompt: ${JSON.stringify(r.failure)}`);
        return null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    check(shown.prompt.url === "https://auth.openai.com/codex/device" && shown.prompt.code === "E2EX-12345", `unexpected prompt ${JSON.stringify(shown.prompt)}`);
    return { detail: `${shown.status}: ${shown.prompt.url} ${shown.prompt.code}` };
  });
  if (codexShown) {
    await step("login terminal: codex auth.json read back, host authenticated", async () => {
      const done = await waitFor(
        "the login's end",
        async () => {
          const r = await apiOk("GET", `/companies/${cid}/adapters/codex_local/login-sessions/${sid}`);
          return terminal.includes(r.status) ? r : null;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      check(done.status === "authenticated", `login ended ${done.status}: ${JSON.stringify(done.failure)}`);
      const secrets = await apiOk("GET", `/companies/${cid}/secrets`);
      const list = Array.isArray(secrets) ? secrets : (secrets?.secrets ?? []);
      check(
        list.some((x) => x.name === "CODEX_HOME_e2e-fake-account"),
        `the host made no CODEX_HOME secret for the account (${list.map((x) => x.name).join(", ")})`,
      );
      return { detail: `status ${done.status}, secret CODEX_HOME_e2e-fake-account` };
    });
  }
  await step("login terminal: codex login sandbox gone", async () => {
    const gone = await sandboxGone(before, "codex");
    if (gone.output !== undefined)
      check(/one-time code/.test(gone.output) && /Successfully logged in/.test(gone.output), `recorded terminal output lacks the prompt: ${JSON.stringify(gone.output.slice(0, 300))}`);
    return { detail: gone.detail };
  });

  // ---- Claude setup-token login
  before = new Set((await leasesOf(eid)).map((l) => l.id));
  if (p.leasesWithoutExpiry) {
    // The host asks the setup-token lease for an expiry within its 5-minute deadline (HOST-CALLS.md §7)
    // and fails closed when the provider returns none: a 503, the lease released, its sandbox gone.
    await step("login terminal: claude setup-token refused (leases without expiry), sandbox gone", async () => {
      const r = await api("POST", `/companies/${cid}/setup-token-login-sessions`, { environmentId: eid, adapterType: "claude_local" });
      check(r.status === 503, `expected the host's 503 for a lease without expiry, got HTTP ${r.status}: ${redactText(r.text).slice(0, 300)}`);
      const lease = await waitFor(
        "the refused login's lease released",
        async () => {
          const l = (await loginLeases(before)).at(-1);
          return l && l.status === "released" && l.releasedAt ? l : null;
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const extra = (await p.leftovers?.(ctx)) ?? [];
      check(extra.length === 0, `provider leftovers after the refused login: ${extra.join("; ")}`);
      return { detail: `${p.driverKey}: ${p.leasesWithoutExpiry}; HTTP 503, lease ${lease.providerLeaseId} released` };
    });
    return;
  }
  const code = `e2e-browser-code-${Date.now().toString(36)}`;
  let csid;
  const claudeShown = await step("login terminal: claude setup-token, sign-in URL shown", async () => {
    const started = await apiOk("POST", `/companies/${cid}/setup-token-login-sessions`, { environmentId: eid, adapterType: "claude_local" });
    csid = started.sessionId;
    const prompt = await waitFor(
      "the sign-in URL",
      async () => {
        const r = await api("GET", `/companies/${cid}/setup-token-login-sessions/${csid}/prompt`);
        if (r.status === 200) return r.json;
        const s = await apiOk("GET", `/companies/${cid}/setup-token-login-sessions/${csid}`);
        if (terminal.includes(s.status)) throw new Error(`the login ended ${s.status} before a prompt: ${JSON.stringify(s.failure)}`);
        return null;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    check(String(prompt.authorizationUrl).startsWith("https://claude.ai/oauth/authorize?"), `unexpected sign-in URL ${String(prompt.authorizationUrl).slice(0, 60)}`);
    return { detail: "https://claude.ai/oauth/authorize?…" };
  });
  if (claudeShown) {
    await step("login terminal: claude browser code typed, token stored", async () => {
      await apiOk("POST", `/companies/${cid}/setup-token-login-sessions/${csid}/code`, { browserCode: code });
      const done = await waitFor(
        "the login's end",
        async () => {
          const r = await apiOk("GET", `/companies/${cid}/setup-token-login-sessions/${csid}`);
          return terminal.includes(r.status) ? r : null;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      check(done.status === "authenticated", `login ended ${done.status}: ${JSON.stringify(done.failure)}`);
      const completion = await apiOk("POST", `/companies/${cid}/setup-token-login-sessions/${csid}/completion`, {});
      check(typeof completion.storedSessionId === "string" && completion.storedSessionId.length > 0, "no storedSessionId from the completion");
      const signal = await apiOk("GET", `/companies/${cid}/adapters/claude_local/auth-signal?environmentId=${eid}`);
      check(signal.status === "present", `claude auth signal is ${signal.status} after the login`);
      return { detail: `status ${done.status}, auth signal ${signal.status}` };
    });
  }
  await step("login terminal: claude login sandbox gone, code echoed", async () => {
    const gone = await sandboxGone(before, "claude");
    if (gone.output !== undefined) {
      const prompt = gone.output.indexOf("Paste code here if prompted");
      const echoed = gone.output.indexOf(code, prompt);
      check(prompt >= 0 && echoed > prompt, `the terminal did not echo the typed code after the prompt: ${JSON.stringify(gone.output.slice(-400))}`);
      check(/received a browser code of \d+ characters/.test(gone.output), "the fake claude never read the code");
      check(!/sk-ant-oat01-/.test(gone.output), "the recorder kept a token");
    }
    return { detail: gone.detail };
  });
}

/**
 * The host's experimental HTTP/2 callback bridge: with the instance setting `enableSandboxDuplexBridge`
 * on, a provider that declares `duplexCommandStream` gets one duplex channel per run for the agent's
 * API calls instead of the polled file queue. The setting is instance-wide, so it is turned back off
 * (whatever happens) before the other scenarios.
 */
async function duplexScenario(p, agentId, eid) {
  const before = await apiOk("GET", "/instance/settings/experimental");
  const samples = [];
  try {
    const on = await step("duplex bridge: experimental setting on", async () => {
      const after = await apiOk("PATCH", "/instance/settings/experimental", { enableSandboxDuplexBridge: true });
      check(after?.enableSandboxDuplexBridge === true, `setting not applied: ${JSON.stringify(after)}`);
    });
    for (let i = 0; on && i < p.duplex.runs; i++) {
      const ok = await step(`duplex bridge: task run ${i + 1}/${p.duplex.runs}`, async () => {
        const r = await taskRun({ agentId, environmentId: eid });
        await checkRunResult(p, r);
        await checkReleased(p, r);
        const text = await runLogText(r.runId);
        check(
          /HTTP\/2 transport ready/.test(text),
          `the run did not use the duplex channel: ${redactText(
            text
              .split("\n")
              .filter((l) => /duplex|file bridge|HTTP\/2/i.test(l))
              .join(" | "),
          ).slice(0, 400)}`,
        );
        const calls = recordedCalls(current.pluginKey);
        let detail = `acquired ${fmtMs(r.toAcquireMs)}, done ${fmtMs(r.toDoneMs)}, released ${fmtMs(r.toReleaseMs)}`;
        if (calls) {
          const mine = calls.filter((c) => c.dir === "call" && (c.params?.providerLeaseId === r.lease.providerLeaseId || c.params?.lease?.providerLeaseId === r.lease.providerLeaseId));
          const routes = new Set(mine.filter((c) => c.method === "duplexChannelOpen").map((c) => c.params.hostRouteId));
          check(routes.size > 0, "no duplexChannelOpen recorded for the run's lease");
          const onRoutes = (method) => calls.filter((c) => c.dir === "call" && c.method === method && routes.has(c.params?.hostRouteId));
          check(onRoutes("duplexChannelClose").length > 0, "the host never closed the run's duplex channel");
          const executes = mine.filter((c) => c.method === "environmentExecute").length;
          detail += `; ${executes} executes, ${onRoutes("duplexChannelWrite").length} channel writes`;
        }
        samples.push(r.toReleaseMs);
        return { ms: r.toReleaseMs, detail };
      });
      if (!ok) break;
    }
  } finally {
    await step("duplex bridge: experimental setting restored", async () => {
      const restored = await apiOk("PATCH", "/instance/settings/experimental", { enableSandboxDuplexBridge: before?.enableSandboxDuplexBridge === true });
      check(restored?.enableSandboxDuplexBridge === (before?.enableSandboxDuplexBridge === true), "setting not restored");
    });
  }
  if (samples.length === p.duplex.runs && samples.length > 1) {
    const m = median(samples);
    rows.push({ provider: current.provider, step: `median assignment -> lease release, duplex bridge (${samples.length} runs)`, ok: true, ms: m, detail: "informational" });
    console.log(`  info  median assignment -> lease release with the duplex bridge: ${fmtMs(m)}`);
  }
}

/**
 * The host's ACP engine (HOST-CALLS.md §9): a claude_local agent with engine "acp" whose agentCommand is
 * the fake ACP agent. When the driver declares incrementalSessionOutput the host runs the agent's
 * session as one long execute and reads its frames from that execute's live log; otherwise it starts
 * the session in the background and polls its output files with an execute about every 100 ms.
 * Reports the trivial-task time and the executes the worker saw for the run's lease.
 */
async function acpScenario(p, cid, eid, options = {}) {
  const manifest = (await import(pathToFileURL(path.join(env.E2E_REPO, p.dir, "dist", "manifest.js")).href)).default;
  const declared = options.declared ?? manifest.environmentDrivers?.find((d) => d.driverKey === p.driverKey)?.sandboxCapabilities?.incrementalSessionOutput === true;
  const mode = declared ? "streamed session output" : "output-file poll";
  const agent = await step(`create claude_local agent (engine acp, fake ACP agent${declared ? "" : ", poll"})`, async () => ({
    agent: await apiOk("POST", `/companies/${cid}/agents`, {
      name: `FakeAcp-${p.driverKey}${declared ? "" : "-poll"}`,
      role: "engineer",
      adapterType: "claude_local",
      defaultEnvironmentId: eid,
      adapterConfig: { engine: "acp", agentCommand: FAKE_ACP, model: "claude-sonnet-4-6", timeoutSec: 120 },
    }),
  }));
  if (!agent) return;
  await step(`acp task run (${mode}): assignment -> done`, async () => {
    const r = await taskRun({ agentId: agent.agent.id, environmentId: eid });
    await checkReleased(p, r);
    const text = await runLogText(r.runId);
    const streamed = /Starting streamed ACP process session bridge/.test(text);
    const polled = /Starting ACP process session bridge/.test(text);
    check(streamed || polled, `the run did not start an ACP process session: ${redactText(text).slice(-400)}`);
    check(streamed === declared, `the host ${streamed ? "streamed" : "polled"} the session output though the driver ${declared ? "declares" : "does not declare"} incrementalSessionOutput`);
    let detail = `${mode}; acquired ${fmtMs(r.toAcquireMs)}, done ${fmtMs(r.toDoneMs)}, released ${fmtMs(r.toReleaseMs)}`;
    const calls = recordedCalls(current.pluginKey);
    if (calls) {
      const executes = calls.filter((c) => c.dir === "call" && c.method === "environmentExecute" && c.params?.lease?.providerLeaseId === r.lease.providerLeaseId).length;
      detail += `; ${executes} executes`;
    }
    return { ms: r.toDoneMs, detail };
  });
}

/**
 * The ACP task on the output-file poll (E2E_ACP_POLL=1, HOST-CALLS.md §9): the host reads only the
 * installed manifest, so the plugin is swapped for a copy whose manifest leaves incrementalSessionOutput
 * out (a wrapper module over the built one), the task runs on a new environment, and the original
 * install is put back (its new id replaces the old in `plugin`) for whatever follows.
 */
async function acpPollScenario(p, plugin, cid, baseConfig) {
  const pollDir = `${plugin.dir}-acp-poll`;
  const made = await step("acp poll: a copy of the plugin without incrementalSessionOutput", async () => {
    fs.rmSync(pollDir, { recursive: true, force: true });
    fs.cpSync(plugin.dir, pollDir, { recursive: true, verbatimSymlinks: true });
    const pkgFile = path.join(pollDir, "package.json");
    const pkg = readJson(pkgFile);
    const base = pkg.paperclipPlugin.manifest;
    const wrapper = base.replace(/\.(m?js)$/, ".e2e-poll.$1");
    fs.writeFileSync(
      path.join(pollDir, wrapper),
      [
        `import manifest from ${JSON.stringify(`./${path.basename(base)}`)};`,
        "const drop = ({ incrementalSessionOutput, ...rest }) => rest;",
        "export default { ...manifest, environmentDrivers: (manifest.environmentDrivers ?? []).map((d) => (d.sandboxCapabilities ? { ...d, sandboxCapabilities: drop(d.sandboxCapabilities) } : d)) };",
        "",
      ].join("\n"),
    );
    fs.writeFileSync(pkgFile, JSON.stringify({ ...pkg, paperclipPlugin: { ...pkg.paperclipPlugin, manifest: wrapper } }, null, 2));
    fs.chmodSync(pollDir, 0o755);
    for (const f of [pkgFile, path.join(pollDir, wrapper)]) fs.chmodSync(f, 0o644);
    return { detail: path.relative(RUN_DIR, pollDir) };
  });
  if (!made) return;
  const swap = async (dir, label) =>
    step(`acp poll: install ${label} (local path)`, async () => {
      await apiOk("DELETE", `/plugins/${plugin.id}?purge=true`, undefined, { timeoutMs: 120_000 });
      const r = await apiOk("POST", "/plugins/install", { packageName: dir, isLocalPath: true }, { timeoutMs: 120_000 });
      check(r.status === "ready", `plugin status ${r.status}: ${redactText(r.lastError ?? "")}`);
      pluginIds.add(r.id);
      plugin.id = r.id;
      const caps = r.manifestJson?.environmentDrivers?.find((d) => d.driverKey === p.driverKey)?.sandboxCapabilities ?? {};
      return { detail: `incrementalSessionOutput ${caps.incrementalSessionOutput === true ? "declared" : "not declared"}` };
    });
  if (await swap(pollDir, "the poll copy")) {
    const envRes = await step("acp poll: sandbox environment", async () => {
      const e = await apiOk("POST", `/companies/${cid}/environments`, { name: instanceName(p, "-acp-poll"), driver: "sandbox", config: baseConfig });
      current.environmentIds.push(e.id);
      return { env: e };
    });
    if (envRes) await acpScenario(p, cid, envRes.env.id, { declared: false });
  }
  await swap(plugin.dir, "the original again");
}

/**
 * Why the host's follow-up run got a new sandbox instead of run 1's kept lease, when that is the host's
 * race and not the provider's doing; null otherwise. The race: the host marks a run finished, then runs
 * its teardown on the lease (the GitHub launcher cleanup, an execute) and only then retains the lease,
 * while a follow-up run on the still-open issue may already acquire and finds no resumable lease.
 * Proof, either of: the worker recorder shows a host call on run 1's lease that returned after the
 * follow-up's acquire call; our own poll, started after the follow-up lease's acquiredAt, still read
 * run 1's lease as active.
 * A resume that was tried and failed ("replacement") or a lease never created anew is judged as usual.
 */
const TEARDOWN_IRRELEVANT = new Set(["environmentAcquireLease", "environmentResumeLease", "environmentDestroyLease"]);
function hostRaceOf(lease2, lease1Seen, calls, lease1ProviderLeaseId) {
  if (lease2.providerLeaseId === lease1ProviderLeaseId) return null;
  if (lease2.metadata?.sandboxLeaseAcquisition?.outcome !== "created") return null;
  const leaseOf = (c) => c.params?.providerLeaseId ?? c.params?.lease?.providerLeaseId;
  if (calls?.some((c) => c.dir === "call" && c.method === "environmentResumeLease" && leaseOf(c) === lease1ProviderLeaseId)) return null;
  const acquire = calls?.find((c) => c.dir === "call" && c.method === "environmentAcquireLease" && c.params?.runId === lease2.heartbeatRunId);
  if (acquire) {
    // A call on run 1's lease still open when the follow-up asked for its lease: the host retains a lease
    // only after its teardown calls return, and it looks for a resumable one before it asks.
    const open = new Map();
    for (const c of calls) {
      // Its destroy (the issue turned done) may well come later; it proves nothing.
      if (c.dir === "call" && !TEARDOWN_IRRELEVANT.has(c.method) && leaseOf(c) === lease1ProviderLeaseId) open.set(c.id, c);
      else if (c.dir === "reply" && open.has(c.id)) {
        const call = open.get(c.id);
        open.delete(c.id);
        if (c.t > acquire.t) {
          const ms = Date.parse(c.t) - Date.parse(acquire.t);
          return `run 1's teardown call ${call.method} on its lease returned ${ms} ms after the follow-up run ${lease2.heartbeatRunId} asked for a lease (${lease2.providerLeaseId}, created): the host never offered run 1's lease for resume`;
        }
      }
    }
  }
  const acquiredAt = Date.parse(lease2.acquiredAt);
  const seen = lease1Seen.find(([t, status]) => t > acquiredAt && status === "active");
  if (seen) {
    return `run 1's lease still read active ${seen[0] - acquiredAt} ms after the follow-up run ${lease2.heartbeatRunId} acquired ${lease2.providerLeaseId} (created): the host never offered it for resume`;
  }
  return null;
}

/**
 * reuseLease on the real host (2026.916.1) needs: the provider's reusableLeases capability, `reuseLease: true`,
 * an execution workspace bound to the issue (a project workspace plus `runnerLifecycleMode: "warm"`, which makes
 * the host bind the issue to its persisted execution workspace), and an issue that stays open: the host destroys
 * an issue's reusable leases as soon as it turns done or cancelled, so a reopen after done always starts fresh.
 * Flow: the fake leaves the issue open on its assignment run; the next run on the same issue (the host's own
 * follow-up, or our comment with reopen: true if none starts) must resume the same provider lease.
 */
async function reuseScenario(p, cid, baseConfig) {
  let eid, agentId, projectId;
  const newAgent = async (tag) =>
    (
      await apiOk("POST", `/companies/${cid}/agents`, {
        name: `FakeClaude-${p.driverKey}-reuse${tag}`,
        role: "engineer",
        adapterType: "claude_local",
        defaultEnvironmentId: eid,
        adapterConfig: { engine: "cli", command: FAKE, model: "claude-sonnet-4-6", timeoutSec: 120 },
      })
    ).id;
  const setup = await step("reuse: project + environment (reuseLease, warm) + agent", async () => {
    const wsDir = path.join(RUN_DIR, `projws-${p.driverKey}-${ctx.installMode ?? "path"}`);
    fs.mkdirSync(wsDir, { recursive: true });
    // A git repo: the host refuses to archive an execution workspace whose git status it cannot verify,
    // and archiving is how the retained lease is ended below.
    fs.writeFileSync(path.join(wsDir, "README.md"), "e2e project workspace\n");
    const git = (...args) => execFileSync("git", ["-C", wsDir, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", ...args], { stdio: "pipe" });
    git("init", "-q");
    git("add", "-A");
    git("commit", "-q", "-m", "e2e fixture");
    execFileSync("chown", ["-R", "65534:65534", wsDir]);
    const e = await apiOk("POST", `/companies/${cid}/environments`, {
      name: instanceName(p, "-reuse"),
      driver: "sandbox",
      config: { ...baseConfig, reuseLease: true, runnerLifecycleMode: "warm", runnerIdleTimeoutMs: 1000 },
    });
    eid = e.id;
    current.environmentIds.push(eid);
    check(e.config?.reuseLease === true, `saved config lost reuseLease: ${JSON.stringify(e.config)}`);
    const proj = await apiOk("POST", `/companies/${cid}/projects`, {
      name: instanceName(p, "-project"),
      status: "in_progress",
      workspace: { name: "ws", sourceType: "local_path", cwd: wsDir, isPrimary: true },
      executionWorkspacePolicy: { enabled: true, defaultMode: "shared_workspace", environmentId: eid },
    });
    projectId = proj.id;
    agentId = await newAgent("");
  });
  if (!setup) return;

  // The host offers a kept lease for resume only once its status is released or retained
  // (`reusableLeaseCanBeResumed`). Its own follow-up run can acquire before run 1's lease got there:
  // that run then gets a new sandbox ("created") and the provider is never asked. Seen once in CI
  // (cloudflare, by path). That is the host's race, told apart below and tried once more on a new issue.
  let issueId, lease1, run1, lease2, run2;
  let siblings = [];
  const raced = [];
  let outcome;
  for (let attempt = 1; attempt <= 2 && outcome !== "judged" && outcome !== "failed"; attempt++) {
    // A new agent: the host offers a kept lease only to the agent that made it, so the raced attempt's
    // leases (kept past their issue's done when warm) are no candidates for this one.
    if (attempt > 1) agentId = await newAgent("-again");
    outcome = await reuseAttempt(attempt === 1 ? "" : " (again, after the host's race)");
  }
  async function reuseAttempt(suffix) {
    issueId = lease1 = run1 = lease2 = run2 = undefined;
    siblings = [];
    // lease1's status as seen by our polls: [request start, status]. A poll that starts after the follow-up's
    // acquiredAt and still reads "active" proves lease1 was no resume candidate when the host looked.
    const lease1Seen = [];
    const pollLeases = async () => {
      const t = Date.now();
      const rows = await leasesOf(eid);
      const row = lease1 && rows.find((l) => l.id === lease1.id);
      if (row) lease1Seen.push([t, row.status]);
      return rows;
    };
    await step(`reuse: first run (issue left open)${suffix}`, async () => {
      const t0 = now();
      const issue = await apiOk("POST", `/companies/${cid}/issues`, {
        title: `[e2e-keep-open] reuse ${new Date().toISOString()}`,
        description: "Leave the issue open on the first run.",
        projectId,
        assigneeAgentId: agentId,
        status: "todo",
      });
      issueId = issue.id;
      lease1 = await waitFor("first lease", async () => (await leasesOf(eid)).find((l) => l.issueId === issueId && l.heartbeatRunId) ?? null, { timeoutMs: 60_000 });
      current.runIds.push(lease1.heartbeatRunId);
      run1 = await runFinished("first run finished", lease1.heartbeatRunId, { onFinished: pollLeases });
      check(run1.status === "succeeded", `first run ${run1.status}: ${redactText(JSON.stringify(run1.error ?? ""))}`);
      lease1 = (await pollLeases()).find((l) => l.id === lease1.id) ?? lease1; // now with its workspace realization
      const res = await checkRunResult(p, { issueId, runId: run1.id, run: run1, lease: lease1 }, { expectMarkerBefore: "none" });
      check(lease1.leasePolicy === "reuse_by_environment", `lease policy ${lease1.leasePolicy} (reuse not enabled by the host)`);
      check(lease1.executionWorkspaceId, "no execution workspace bound to the lease");
      return { ms: now() - t0, detail: `lease ${lease1.providerLeaseId}, workspace ${path.basename(res.hostWs)}` };
    });
    if (!run1) return "failed";

    let trigger = "host follow-up run",
      outcome = "failed";
    await step(`reuse: second run on the same issue resumes the same lease${suffix}`, async () => {
      const t0 = now();
      const findNext = async () => (await pollLeases()).find((l) => l.issueId === issueId && l.heartbeatRunId && l.heartbeatRunId !== run1.id) ?? null;
      lease2 = await waitFor("a second run", findNext, { timeoutMs: 10_000 }).catch(() => null);
      if (!lease2) {
        trigger = "comment with reopen: true";
        await apiOk("POST", `/issues/${issueId}/comments`, { body: "e2e: please run again", reopen: true });
        lease2 = await waitFor("a second run after the comment", findNext, { timeoutMs: 60_000 });
      }
      current.runIds.push(lease2.heartbeatRunId);
      // Right away, while lease1's status still says what the host saw.
      await pollLeases();
      run2 = await runFinished("second run finished", lease2.heartbeatRunId);
      await waitFor("issue done", async () => (await api("GET", `/issues/${issueId}`)).json?.status === "done", { timeoutMs: 30_000 });
      // The host's periodic recovery may requeue the issue's continuation beside its own follow-up run
      // ("continuationRequeued"): that sibling gets a fresh sandbox and may finish the issue first. Seen
      // once in CI (exe-dev, by path). The sibling is the host's doing; this run's resume must still hold.
      // Either run may have been found first above: the one under test is the one on the first lease.
      const others = (await leasesOf(eid)).filter((l) => l.issueId === issueId && l.heartbeatRunId && l.heartbeatRunId !== run1.id);
      const resumedRow = others.find((l) => l.providerLeaseId === lease1.providerLeaseId);
      if (resumedRow && resumedRow.heartbeatRunId !== lease2.heartbeatRunId) {
        lease2 = resumedRow;
        run2 = await runFinished("resumed run finished", lease2.heartbeatRunId);
      }
      lease2 = (await leasesOf(eid)).find((l) => l.id === lease2.id) ?? lease2;
      siblings = others.filter((l) => l.heartbeatRunId !== run2.id);
      const race = !resumedRow && hostRaceOf(lease2, lease1Seen, recordedCalls(current.pluginKey), lease1.providerLeaseId);
      if (race) {
        // Not the provider's doing: the scenario runs once more; its leases end in the last step.
        outcome = "raced";
        raced.push(lease1, lease2, ...siblings);
        return { ms: now() - t0, detail: `not judged, the host's race: ${race}` };
      }
      const comments = await apiOk("GET", `/issues/${issueId}/comments`);
      const commentList = Array.isArray(comments) ? comments : (comments?.comments ?? []);
      let closedBySibling = false;
      for (const sib of siblings) {
        if (!current.runIds.includes(sib.heartbeatRunId)) current.runIds.push(sib.heartbeatRunId);
        const sr = await runFinished("sibling run finished", sib.heartbeatRunId);
        // Only a sibling that succeeded AND left its own comment (its done) can have closed the issue first.
        const sibComment = commentList.some((c) => String(c.body ?? "").includes(`e2e-fake-claude run=${sib.heartbeatRunId}`));
        if (sr.status === "succeeded" && sibComment) closedBySibling = true;
      }
      // The marker the first run wrote under $HOME (outside the synced workspace) must still be there.
      // A provider whose kept lease keeps its processes (p.reuseKeepsProcess) still runs the first run's keeper.
      const kept = await checkRunResult(
        p,
        { issueId, runId: run2.id, run: run2, lease: lease2 },
        { expectMarkerBefore: run1.id, closedBySibling, ...(p.reuseKeepsProcess ? { expectKeeper: "yes" } : {}) },
      );
      check(lease2.providerLeaseId === lease1.providerLeaseId, `different provider lease: ${lease1.providerLeaseId} then ${lease2.providerLeaseId}`);
      const acquisition = lease2.metadata?.sandboxLeaseAcquisition?.outcome;
      check(acquisition === "resumed", `second acquisition outcome ${acquisition} (expected resumed)`);
      const calls = recordedCalls(current.pluginKey);
      if (calls) {
        const resume = calls.find((c) => c.dir === "call" && c.method === "environmentResumeLease" && c.params?.providerLeaseId === lease1.providerLeaseId);
        check(resume, "no resumeLease call recorded for the first lease");
      }
      return {
        ms: now() - t0,
        detail: `trigger: ${trigger}; same lease ${lease2.providerLeaseId} (${acquisition}); $HOME marker of run 1 kept; run 1's process ${kept.keeperAlive === "yes" ? "kept" : `not kept (${kept.keeperAlive})`}${siblings.length ? `; the host's recovery also ran ${siblings.map((l) => l.heartbeatRunId).join(", ")} on the issue (lease ${siblings.map((l) => l.providerLeaseId).join(", ")})` : ""}`,
      };
    });
    if (outcome !== "raced" && run2) outcome = "judged";
    return outcome;
  }
  if (outcome === "raced") {
    await step("reuse: second run on the same issue resumes the same lease", async () => {
      throw new Error("the host's follow-up run acquired before run 1's lease was released, on both attempts");
    });
  }
  // A raced attempt's leases (run 1's, its follow-up's new sandbox, any sibling) end with the rest below.
  if (run2) siblings.push(...raced.filter((l) => l.providerLeaseId !== lease1.providerLeaseId && !siblings.some((s) => s.id === l.id)));
  if (!run2) return;
  await step("reuse: lease destroyed (issue done / workspace archived), nothing left", async () => {
    const t0 = now();
    const terminal = async () => {
      const rows = (await leasesOf(eid)).filter((x) => x.providerLeaseId === lease1.providerLeaseId);
      return rows.length && rows.every((x) => !["active", "released", "retained"].includes(x.status)) ? rows[0] : null;
    };
    // A warm reusable lease outlives its issue's done (the destroy skips a lease whose run is live and the
    // finalizer retains it). Archiving the execution workspace is the operator's way to end it.
    let how = "issue done";
    const archived = new Set();
    if (!(await waitFor("destroy after done", terminal, { timeoutMs: 3_000, intervalMs: 200 }).catch(() => null))) {
      how = "execution workspace archived";
      archived.add(lease1.executionWorkspaceId);
      await apiOk("PATCH", `/execution-workspaces/${lease1.executionWorkspaceId}`, { status: "archived" });
    }
    const lease = await waitFor("reusable lease destroyed", terminal, { timeoutMs: 30_000, intervalMs: 200 }).catch(async (err) => {
      const rows = (await leasesOf(eid)).filter((x) => x.providerLeaseId === lease1.providerLeaseId);
      throw new Error(`${err.message}; rows: ${rows.map((x) => `${x.status}/${x.failureReason ?? ""}`).join(", ")}`);
    });
    await checkReleased(p, { lease }, { statuses: ["expired", "destroyed", "released"] });
    // A sibling run's own sandbox (see above) must end too: the issue is done, and a warm one the
    // finalizer retained ends with its execution workspace, archived here if the host has not yet.
    for (const sib of siblings) {
      if (sib.providerLeaseId === lease1.providerLeaseId) continue;
      const ended = async () => {
        const rows = (await leasesOf(eid)).filter((x) => x.providerLeaseId === sib.providerLeaseId);
        return rows.length && rows.every((x) => !["active", "released", "retained"].includes(x.status)) ? rows[0] : null;
      };
      if (!(await waitFor("sibling lease ended", ended, { timeoutMs: 3_000, intervalMs: 200 }).catch(() => null))) {
        const ws = sib.executionWorkspaceId;
        if (ws && !archived.has(ws)) {
          archived.add(ws);
          await apiOk("PATCH", `/execution-workspaces/${ws}`, { status: "archived" });
        }
      }
      const sibLease = await waitFor("sibling run's lease ended", ended, { timeoutMs: 30_000, intervalMs: 200 }).catch(async (err) => {
        const rows = (await leasesOf(eid)).filter((x) => x.providerLeaseId === sib.providerLeaseId);
        throw new Error(`${err.message}; sibling rows: ${rows.map((x) => `${x.status}/${x.failureReason ?? ""}`).join(", ")}`);
      });
      await checkReleased(p, { lease: sibLease }, { statuses: ["expired", "destroyed", "released"] });
    }
    return {
      ms: now() - t0,
      detail: `after ${how}: lease ${lease.providerLeaseId} ${lease.status} ${lease.failureReason ?? ""}${siblings.length ? `; ${siblings.length} sibling lease(s) ended too` : ""}`,
    };
  });
}

// ---------------------------------------------------------------- install modes
const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
/** The host's managed install of a package: <PLUGIN_HOME>/node_modules/<name>. */
const managedDir = (packageName) => path.join(PLUGIN_HOME, "node_modules", ...packageName.split("/"));
/** The pids of running workers the server started from `workerFile`. */
function workerPids(workerFile) {
  return fs
    .readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map(Number)
    .map(procInfo)
    .filter((q) => q && q.uid === 65534 && q.state !== "Z" && q.cmdline.includes(workerFile))
    .map((q) => q.pid);
}

/** By local path: the copies run.sh prepared (prepare-copy.mjs, with the call recorder). */
async function installByPath(installed) {
  for (const plugin of pluginRows) {
    current.pluginKey = plugin.key;
    await step(`install plugin ${plugin.key} (local path)`, async () => {
      const r = await apiOk("POST", "/plugins/install", { packageName: plugin.dir, isLocalPath: true }, { timeoutMs: 120_000 });
      check(r.status === "ready", `plugin status ${r.status}: ${redactText(r.lastError ?? "")}`);
      pluginIds.add(r.id);
      for (const d of r.manifestJson?.environmentDrivers ?? []) installed.set(d.driverKey, { ...plugin, id: r.id, mode: "path" });
      return { detail: `drivers: ${(r.manifestJson?.environmentDrivers ?? []).map((d) => d.driverKey).join(",")}` };
    });
  }
}

/**
 * By package name, as an operator does: POST /plugins/install {"packageName"}. The host runs
 * `npm install <name> --prefix ~/.paperclip/plugins --save --ignore-scripts` as its own user, whose
 * ~/.npmrc points at the local registry; the worker then runs from that install.
 */
async function installByName(installed) {
  const dirs = [...new Set(PROVIDERS.filter((p) => !only.length || only.includes(p.driverKey)).map((p) => p.dir))];
  for (const dir of dirs) {
    const { name: packageName, version } = readJson(path.join(REPO, dir, "package.json"));
    current.pluginKey = packageName;
    await step(`install plugin ${packageName} (by name)`, async () => {
      const r = await apiOk("POST", "/plugins/install", { packageName }, { timeoutMs: 180_000 });
      check(r.status === "ready", `plugin status ${r.status}: ${redactText(r.lastError ?? "")}`);
      check(!r.packagePath, `the host recorded a local path ${r.packagePath} for a registry install`);
      check(r.version === version, `the host recorded version ${r.version}, the registry's latest is ${version}`);
      const managed = managedDir(packageName);
      check(readJson(path.join(managed, "package.json")).version === version, `${managed} is not ${packageName}@${version}`);
      // The provider's own dependencies came along, every one of them from the local registry.
      const lock = readJson(path.join(PLUGIN_HOME, "package-lock.json"));
      const resolved = Object.entries(lock.packages ?? {})
        .filter(([k]) => k)
        .map(([k, v]) => [k, v.resolved]);
      const foreign = resolved.filter(([, url]) => !String(url).startsWith(REGISTRY_URL));
      check(
        foreign.length === 0,
        `packages not from ${REGISTRY_URL}: ${foreign
          .map(([k, u]) => `${k} ${u}`)
          .join(", ")
          .slice(0, 300)}`,
      );
      const deps = Object.keys(readJson(path.join(managed, "package.json")).dependencies ?? {});
      const missing = deps.filter((d) => !fs.existsSync(path.join(managed, "node_modules", d)) && !fs.existsSync(path.join(PLUGIN_HOME, "node_modules", d)));
      check(missing.length === 0, `dependencies not installed beside it: ${missing.join(", ")}`);
      const workerFile = path.join(managed, r.manifestJson.entrypoints.worker);
      const pids = await waitFor(`a worker running ${workerFile}`, async () => (workerPids(workerFile).length ? workerPids(workerFile) : null), { timeoutMs: 15_000 });
      pluginIds.add(r.id);
      const plugin = { key: r.pluginKey, id: r.id, dir: managed, mode: "name", packageName, version, workerFile, workerPid: pids[0] };
      for (const d of r.manifestJson?.environmentDrivers ?? []) installed.set(d.driverKey, plugin);
      return { detail: `${packageName}@${r.version} into ~/.paperclip/plugins, ${resolved.length} packages from the local registry; worker pid ${pids[0]} runs ${path.relative(RUN_DIR, workerFile)}` };
    });
  }
}

/** Uninstall (purge) every plugin of a pass, so the next mode installs the same plugin ids afresh. */
async function uninstallAll(installed, mode) {
  for (const plugin of new Set(installed.values())) {
    current.pluginKey = plugin.key;
    await step(`uninstall plugin ${plugin.key} (installed by ${mode})`, async () => {
      await apiOk("DELETE", `/plugins/${plugin.id}?purge=true`, undefined, { timeoutMs: 120_000 });
      const after = await api("GET", `/plugins/${plugin.id}`);
      check(after.status === 404 || after.json?.status === "uninstalled", `plugin still there: HTTP ${after.status} ${redactText(after.text).slice(0, 200)}`);
      if (plugin.mode === "name") {
        await waitFor("its worker gone", async () => workerPids(plugin.workerFile).length === 0, { timeoutMs: 15_000 });
        check(!fs.existsSync(plugin.dir), `the host left its install at ${plugin.dir}`);
      }
      return { detail: plugin.mode === "name" ? "worker stopped, managed install removed" : "" };
    });
  }
}

/**
 * A newer version over the installed one through the API (POST /plugins/:id/upgrade {version}: the
 * host npm-installs it into its managed folder, stops the old worker and starts the new one); the
 * environment and agent made before must keep working.
 */
async function upgradeScenario(p, plugin, { agentId, eid, cid }) {
  const to = upgradeVersionOf(plugin.version);
  const up = await step(`upgrade: ${plugin.version} -> ${to} over the API`, async () => {
    const r = await apiOk("POST", `/plugins/${plugin.id}/upgrade`, { version: to }, { timeoutMs: 180_000 });
    check(r.status === "ready" && r.version === to, `after the upgrade: status ${r.status}, version ${r.version} ${redactText(r.lastError ?? "")}`);
    check(readJson(path.join(plugin.dir, "package.json")).version === to, `the managed install is not ${to}`);
    const pids = await waitFor(
      "the new worker",
      async () => {
        const now = workerPids(plugin.workerFile).filter((pid) => pid !== plugin.workerPid);
        return now.length && !workerPids(plugin.workerFile).includes(plugin.workerPid) ? now : null;
      },
      { timeoutMs: 20_000 },
    );
    plugin.workerPid = pids[0];
    plugin.version = to;
    return { detail: `host records ${r.version}; old worker stopped, new worker pid ${pids[0]}` };
  });
  if (!up) return;
  await step("upgrade: the environment saved before probes", async () => {
    const r = await apiOk("POST", `/environments/${eid}/probe?companyId=${cid}`, {}, { timeoutMs: 130_000 });
    check(r.ok === true, `probe not ok: ${redactText(JSON.stringify(r)).slice(0, 400)}`);
    return { detail: r.summary ?? "" };
  });
  await step("upgrade: task run on the environment and agent made before", async () => {
    const r = await taskRun({ agentId, environmentId: eid });
    await checkRunResult(p, r);
    await checkReleased(p, r);
    return { ms: r.toReleaseMs, detail: `run ${r.runId}, lease ${r.lease.providerLeaseId} released` };
  });
}

// ---------------------------------------------------------------- main
const t0 = now();
for (const [pass, mode] of INSTALL_MODES.entries()) {
  current = { provider: `host (by ${mode})`, companyId: null, environmentIds: [], runIds: [], pluginKey: null, recorded: false };
  console.log(`\n== host: install by ${mode}`);
  ctx.installMode = mode;
  const installed = new Map();
  if (mode === "name") await installByName(installed);
  else if (mode === "path") await installByPath(installed);
  else throw new Error(`E2E_INSTALL: unknown mode ${mode}`);

  // The environment form is behind an experimental setting (off by default): on for the browser test
  // (the first pass only: the form does not depend on how the plugin was installed), then restored.
  let environmentsSettingBefore;
  if (UI_ON && pass === 0) {
    await step("ui: Environments setting on (experimental), browser ready", async () => {
      environmentsSettingBefore = (await apiOk("GET", "/instance/settings/experimental"))?.enableEnvironments === true;
      const after = await apiOk("PATCH", "/instance/settings/experimental", { enableEnvironments: true });
      check(after?.enableEnvironments === true, `setting not applied: ${JSON.stringify(after)}`);
      ui = createUiSession({
        baseUrl: new URL(API).origin,
        outDir: OUT_DIR,
        profileDir: path.join(RUN_DIR, "chromium-profile"),
        chromiumPath: env.E2E_CHROMIUM || "/usr/bin/chromium",
        check,
        apiOk,
      });
      return { detail: `screenshots in ${path.join(OUT_DIR, "ui")}` };
    });
  }
  for (const p of PROVIDERS) {
    if (only.length && !only.includes(p.driverKey)) continue;
    const plugin = installed.get(p.driverKey);
    if (!plugin) {
      rows.push({ provider: `${p.driverKey} (by ${mode})`, step: "plugin installed", ok: false, ms: 0, detail: "no installed plugin declares this driver" });
      failures.push({ provider: p.driverKey, step: "plugin installed", message: "not installed" });
      continue;
    }
    // A hosted provider runs against its vendor emulator, started here (as root, on loopback) and
    // stopped once its scenarios are done; its config reads the emulator's URL and credential.
    let emulator;
    try {
      if (p.emulator) {
        emulator = await p.emulator.start(ctx);
        ctx.emulator = emulator;
        console.log(`[e2e] ${p.driverKey}: emulator at ${emulator.url}`);
        if (EMULATOR_LATENCY_MS > 0) {
          emulator.faults.inject({ kind: "latency", ms: EMULATOR_LATENCY_MS, route: "*" });
          console.log(`[e2e] ${p.driverKey}: ${EMULATOR_LATENCY_MS} ms latency before every vendor call`);
        }
      }
      await runProvider(p, plugin);
    } finally {
      ctx.emulator = undefined;
      if (emulator && CALLS_DIR) dumpEmulatorRequests(p.driverKey, mode, emulator);
      await emulator?.close();
    }
  }

  if (ui) {
    current = { provider: `host (by ${mode})`, companyId: null, environmentIds: [], runIds: [], pluginKey: null, recorded: false };
    await step("ui: browser closed, Environments setting restored", async () => {
      const closed = await ui.close();
      const restored = await apiOk("PATCH", "/instance/settings/experimental", { enableEnvironments: environmentsSettingBefore });
      check(restored?.enableEnvironments === environmentsSettingBefore, "setting not restored");
      const blocked = closed.blocked.length ? `; refused non-loopback requests to ${closed.blocked.join(", ")}` : "";
      return { detail: `${closed.screenshots} screenshots in ${closed.dir}${blocked}` };
    });
    ui = null;
  }
  if (pass < INSTALL_MODES.length - 1) {
    current = { provider: `host (by ${mode})`, companyId: null, environmentIds: [], runIds: [], pluginKey: null, recorded: false };
    await uninstallAll(installed, mode);
  }
}

// ---------------------------------------------------------------- report
console.log("\n================ e2e report (real Paperclip host)");
const w = Math.max(...rows.map((r) => r.step.length), 10);
let last = "";
for (const r of rows) {
  if (r.provider !== last) {
    console.log(`-- ${r.provider}`);
    last = r.provider;
  }
  console.log(`  ${r.ok ? "pass" : "FAIL"}  ${r.step.padEnd(w)}  ${fmtMs(r.ms).padStart(8)}  ${r.ok ? r.detail : r.detail.slice(0, 200)}`);
}
console.log(`total e2e (server already up): ${fmtMs(now() - t0)}; ${failures.length === 0 ? "ALL PASSED" : `${failures.length} FAILED`}`);
process.exit(failures.length === 0 ? 0 : 1);
