#!/usr/bin/env node
// Where a real-host run's time goes: lays the e2e's two recordings side by side, per lease.
//   <calls>/<pluginKey>.ndjson                 every host->worker call and reply (scripts/e2e-paperclip/recorder.mjs)
//   <calls>/<driverKey>.<mode>.emulator.ndjson  every vendor call the provider's emulator saw (e2e.mjs)
// For each lease (acquire -> release reply): the wall time, the time no host->worker call was running
// (the host's own work), and per host method: calls, median and summed duration, the time at least one
// such call was running, and the vendor calls that started while one was running (a vendor call that
// starts while several host calls run counts for the most recently started one).
// Usage: node bench/e2e-breakdown.mjs <callsDir> <pluginKey> <driverKey> [mode=path] [--json]
import fs from "node:fs";
import path from "node:path";
import { summarize } from "./lib/stats.mjs";

const [dir, pluginKey, driverKey, mode = "path"] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
if (!dir || !pluginKey || !driverKey) {
  console.error("usage: node bench/e2e-breakdown.mjs <callsDir> <pluginKey> <driverKey> [mode] [--json]");
  process.exit(2);
}
const readLines = (file) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l))
    : [];

/** @type {any[]} */
const entries = readLines(path.join(dir, `${pluginKey}.ndjson`));
/** @type {any[]} */
const vendor = readLines(path.join(dir, `${driverKey}.${mode}.emulator.ndjson`));

// Pair calls with replies: one interval per host call.
/** @type {Map<any, any>} */
const open = new Map();
/** @type {any[]} */
const calls = [];
for (const e of entries) {
  if (e.dir === "call") open.set(e.id, { method: e.method, start: Date.parse(e.t), params: e.params });
  else if (e.dir === "reply" && open.has(e.id)) {
    const c = open.get(e.id);
    open.delete(e.id);
    c.end = Date.parse(e.t);
    c.ms = e.ms;
    c.result = e.result;
    c.error = e.error;
    c.lease = c.params?.lease?.providerLeaseId ?? c.params?.providerLeaseId ?? e.result?.providerLeaseId;
    calls.push(c);
  }
}
const short = (m) => m.replace(/^environment/, "");
const leases = [...new Set(calls.filter((c) => c.method === "environmentAcquireLease" && c.lease).map((c) => c.lease))];

/** Total length of the union of [start, end) intervals. */
function unionMs(intervals) {
  const s = [...intervals].sort((a, b) => a[0] - b[0]);
  let total = 0;
  let cur;
  for (const [a, b] of s) {
    if (!cur || a > cur[1]) {
      if (cur) total += cur[1] - cur[0];
      cur = [a, b];
    } else cur[1] = Math.max(cur[1], b);
  }
  if (cur) total += cur[1] - cur[0];
  return total;
}

const report = [];
for (const lease of leases) {
  const mine = calls.filter((c) => c.lease === lease).sort((a, b) => a.start - b.start);
  const from = mine[0].start;
  const to = Math.max(...mine.map((c) => c.end));
  const inWindow = vendor.filter((v) => v.startedAt >= from && v.startedAt <= to);
  const byMethod = new Map();
  for (const c of mine) {
    const m = byMethod.get(short(c.method)) ?? { calls: [], vendor: 0, vendorRoutes: new Map() };
    m.calls.push(c);
    byMethod.set(short(c.method), m);
  }
  let unattributed = 0;
  const unattributedRoutes = new Map();
  for (const v of inWindow) {
    const owner = mine.filter((c) => c.start <= v.startedAt && v.startedAt <= c.end).sort((a, b) => b.start - a.start)[0];
    const key = `${v.method} ${v.route ?? "?"}`;
    if (!owner) {
      unattributed++;
      unattributedRoutes.set(key, (unattributedRoutes.get(key) ?? 0) + 1);
      continue;
    }
    const m = byMethod.get(short(owner.method));
    m.vendor++;
    m.vendorRoutes.set(key, (m.vendorRoutes.get(key) ?? 0) + 1);
  }
  const busy = unionMs(mine.map((c) => [c.start, c.end]));
  report.push({
    lease,
    wallMs: to - from,
    hostCallsBusyMs: busy,
    hostOnlyMs: to - from - busy,
    vendorCalls: inWindow.length,
    vendorCallsBetweenHostCalls: unattributed,
    vendorRoutesBetweenHostCalls: Object.fromEntries(unattributedRoutes),
    methods: [...byMethod].map(([method, m]) => ({
      method,
      calls: m.calls.length,
      medianMs: Math.round(summarize(m.calls.map((c) => c.end - c.start)).median),
      sumMs: m.calls.reduce((t, c) => t + (c.end - c.start), 0),
      unionMs: unionMs(m.calls.map((c) => [c.start, c.end])),
      vendorCalls: m.vendor,
      vendorRoutes: Object.fromEntries(m.vendorRoutes),
    })),
  });
}

if (process.argv.includes("--json")) console.log(JSON.stringify(report, null, 2));
else {
  for (const r of report) {
    console.log(
      `\nlease ${r.lease}: wall ${r.wallMs} ms (acquire call -> last reply), a host call running ${r.hostCallsBusyMs} ms, host only ${r.hostOnlyMs} ms; vendor calls ${r.vendorCalls} (${r.vendorCallsBetweenHostCalls} between host calls)`,
    );
    console.log("  method                 calls  median ms  sum ms  union ms  vendor calls");
    for (const m of r.methods) {
      console.log(
        `  ${m.method.padEnd(22)} ${String(m.calls).padStart(5)} ${String(m.medianMs).padStart(10)} ${String(m.sumMs).padStart(7)} ${String(m.unionMs).padStart(9)} ${String(m.vendorCalls).padStart(13)}  ${Object.entries(
          m.vendorRoutes,
        )
          .map(([k, n]) => `${k} x${n}`)
          .join(", ")}`,
      );
    }
    if (r.vendorCallsBetweenHostCalls)
      console.log(
        `  between host calls: ${Object.entries(r.vendorRoutesBetweenHostCalls)
          .map(([k, n]) => `${k} x${n}`)
          .join(", ")}`,
      );
  }
}
