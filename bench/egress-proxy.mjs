#!/usr/bin/env node
// CONNECT setup latency through one lease's egress proxy (packages/sandbox-backend, built dist), next
// to a direct loopback connection measured in the same run (interleaved, order alternating, so both
// see the same machine load). The far end is a loopback HTTPS server; the proxy grants its name
// through a resolver pin, as the tests do.
//
// Per iteration:
//   direct tcp      net.connect to the server until "connect"
//   proxy connect   Unix socket to the proxy, CONNECT granted.test:<port>, until "200 Connection Established"
//   direct tls      net.connect + TLS handshake (servername granted.test) until "secureConnect"
//   proxy tls       CONNECT + TLS handshake through the tunnel (the proxy reads and checks the SNI) until "secureConnect"
//
// With --baseline-proxy FILE (the dist/egress/proxy.js of another build, e.g. the commit before a
// change, copied somewhere under the repository so that it resolves the workspace packages), the
// same two proxy kinds are measured through that build's proxy too, interleaved in the same run.
//
//   node bench/egress-proxy.mjs [--iterations 200] [--warmup 20] [--baseline-proxy FILE] [--out bench/results]
import fs from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createResolver, parseResolveOverrides, startEgressProxy } from "../packages/sandbox-backend/dist/index.js";
import { startHttpsServer } from "../packages/sandbox-backend/dist/test-support/index.js";
import { summarize, round } from "./lib/stats.mjs";

const repoRoot = fileURLToPath(new URL("..", import.meta.url));
const { values: args } = parseArgs({
  options: {
    iterations: { type: "string", default: "200" },
    warmup: { type: "string", default: "20" },
    "baseline-proxy": { type: "string" },
    out: { type: "string", default: path.join(repoRoot, "bench/results") },
  },
});
const iterations = Number(args.iterations);
const warmup = Number(args.warmup);
if (!(iterations >= 200)) throw new Error("--iterations must be at least 200");

async function timed(fn) {
  const started = process.hrtime.bigint();
  const socket = await fn();
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  socket.destroy();
  return ms;
}

function directTcp(port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port }, () => resolve(socket));
    socket.once("error", reject);
  });
}

function proxyConnect(socketPath, port) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method: "CONNECT", path: `granted.test:${port}`, agent: false });
    req.once("connect", (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT ${res.statusCode}`))));
    req.once("error", reject);
    req.end();
  });
}

function handshake(socket) {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({ socket, servername: "granted.test", rejectUnauthorized: false }, () => resolve(secure));
    secure.once("error", reject);
  });
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "bench-egress-"));
const server = await startHttpsServer("127.0.0.1", "bench");
const proxy = await startEgressProxy({
  socketPath: path.join(tmp, "proxy.sock"),
  grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
  resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
});
const baseline = args["baseline-proxy"]
  ? await (await import(path.resolve(args["baseline-proxy"]))).startEgressProxy({
      socketPath: path.join(tmp, "baseline.sock"),
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
    })
  : null;
const kinds = {
  "direct tcp": () => directTcp(server.port),
  "proxy connect": () => proxyConnect(proxy.socketPath, server.port),
  "direct tls": async () => handshake(await directTcp(server.port)),
  "proxy tls": async () => handshake(await proxyConnect(proxy.socketPath, server.port)),
  ...(baseline
    ? {
        "baseline connect": () => proxyConnect(baseline.socketPath, server.port),
        "baseline tls": async () => handshake(await proxyConnect(baseline.socketPath, server.port)),
      }
    : {}),
};
const samples = Object.fromEntries(Object.keys(kinds).map((kind) => [kind, []]));
try {
  const names = Object.keys(kinds);
  for (let i = 0; i < warmup + iterations; i++) {
    const order = i % 2 === 0 ? names : [...names].reverse();
    for (const kind of order) {
      const ms = await timed(kinds[kind]);
      if (i >= warmup) samples[kind].push(ms);
    }
  }
} finally {
  await proxy.close();
  await baseline?.close();
  await server.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}

const summary = Object.fromEntries(Object.entries(samples).map(([kind, values]) => [kind, summarize(values)]));
console.log(`egress proxy CONNECT setup, ${iterations} iterations after ${warmup} warm-up (ms)`);
console.log(["kind".padEnd(16), "median", "p95", "min", "max"].join("\t"));
for (const [kind, s] of Object.entries(summary)) console.log([kind.padEnd(16), round(s.median), round(s.p95), round(s.min), round(s.max)].join("\t"));
const ratios = {
  "proxy connect / direct tcp": summary["proxy connect"].median / summary["direct tcp"].median,
  "proxy tls / direct tls": summary["proxy tls"].median / summary["direct tls"].median,
  ...(baseline
    ? {
        "proxy connect / baseline connect": summary["proxy connect"].median / summary["baseline connect"].median,
        "proxy tls / baseline tls": summary["proxy tls"].median / summary["baseline tls"].median,
      }
    : {}),
};
for (const [name, ratio] of Object.entries(ratios)) console.log(`${name}: ${round(ratio)}x`);
await mkdir(args.out, { recursive: true });
const file = path.join(args.out, `egress-proxy-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
await writeFile(file, JSON.stringify({ node: process.version, cpus: os.cpus().length, loadavg: os.loadavg(), iterations, warmup, summary, ratios }, null, 2));
console.log(`report: ${path.relative(repoRoot, file)}`);
