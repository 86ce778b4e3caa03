// Attacks on the lease's egress found by review (project issue #11), end to end: sandboxed code in a
// real jail against the host-side egress proxy, with loopback servers as the worker host's own
// services and as "the internet". Each failed before its fix. Drives the built worker.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startHarness, type Harness } from "./test-support/harness.js";
import { selfSignedCert, startHttpServer, startHttpsServer, type TestServer } from "@paperclip-sandbox/sandbox-backend/test-support";

let h: Harness;
/** A service on the worker host's loopback that no grant in these tests names. */
let hostHttps: TestServer;
let hostHttp: TestServer;
/** A TLS server that records the server name of every handshake it completes. */
let sni: { port: number; handshakes: (string | false | null)[]; close(): Promise<void> };
/** Accepts connections and never answers (it reads, and closes when the client does): the far end of the flooded tunnels. */
let silent: { port: number; close(): Promise<void> };

const granted = (extra: { allowFqdns?: string[]; allowCidrs?: string[] }) => ({ executionWorkspaceSettings: { networkEgress: extra } });

function listenTracked(server: net.Server): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      }),
    ),
  );
}

beforeAll(async () => {
  hostHttps = await startHttpsServer("127.0.0.1", "host-loopback-service");
  hostHttp = await startHttpServer("127.0.0.1", "host-loopback-plain");
  const handshakes: (string | false | null)[] = [];
  const sniServer = tls.createServer(selfSignedCert("granted.test"), (socket) => {
    handshakes.push(socket.servername);
    socket.end("secure-hello");
  });
  sniServer.on("tlsClientError", () => undefined);
  sni = { ...(await listenTracked(sniServer)), handshakes };
  silent = await listenTracked(net.createServer((socket) => socket.resume()));
  h = await startHarness({ env: { PAPERCLIP_BUBBLEWRAP_RESOLVE: "granted.test=127.0.0.1" } });
});

afterAll(async () => {
  await h?.close();
  await hostHttps?.close();
  await hostHttp?.close();
  await sni?.close();
  await silent?.close();
});

/** curl through the lease's proxy even for loopback literals (the sandbox can always clear NO_PROXY). */
const viaProxy = (url: string) => `NO_PROXY= no_proxy= curl -sS -g -k --max-time 5 '${url}'`;

describe("attack: loopback and the worker host's own addresses through CIDR grants", () => {
  it("does not reach the worker host's loopback under 0.0.0.0/0 and ::/0, in any spelling", async () => {
    const lease = await h.acquire(granted({ allowCidrs: ["0.0.0.0/0", "::/0"] }));
    for (const host of ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.1", "0.0.0.0", "[::ffff:0.0.0.0]"]) {
      const https = await h.sh(lease, viaProxy(`https://${host}:${hostHttps.port}/`));
      expect(https.stdout, host).not.toContain("host-loopback-service");
      expect(https.stderr, host).toMatch(/CONNECT tunnel failed, response 403/);
      expect(https.stderr, host).toMatch(/\[paperclip\] the sandbox egress proxy refused .* is host-local \((loopback|unspecified)\)/);
      const plain = await h.sh(lease, `${viaProxy(`http://${host}:${hostHttp.port}/`)} -w ' status=%{http_code}'`);
      expect(plain.stdout, host).not.toContain("host-loopback-plain");
      expect(plain.stdout, host).toContain("status=403");
    }
    await h.release(lease);
  });

  const ownAddress = Object.values(os.networkInterfaces())
    .flat()
    .find((entry) => entry && !entry.internal && entry.family === "IPv4")?.address;

  it.skipIf(ownAddress === undefined)("does not reach the worker host's own interface address under 0.0.0.0/0", async () => {
    const lease = await h.acquire(granted({ allowCidrs: ["0.0.0.0/0"] }));
    const result = await h.sh(lease, viaProxy(`https://${ownAddress}:${silent.port}/`));
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toMatch(/CONNECT tunnel failed, response 403/);
    expect(result.stderr).toMatch(/is host-local \(the worker host's own address\)/);
    await h.release(lease);
  });
});

/** In the jail: CONNECT granted.test:<port> through HTTPS_PROXY, then a TLS handshake for `servername`, its ClientHello re-framed by `mode`. */
const TLS_CLIENT_SCRIPT = `
const http = require("http"), net = require("net"), tls = require("tls");
const [port, servername, mode] = process.argv.slice(1);
const done = (what) => { console.log(what); process.exit(0); };
const handshake = (transport) => {
  const s = tls.connect({ socket: transport, servername, rejectUnauthorized: false });
  let body = "";
  s.on("data", (d) => (body += d));
  s.on("end", () => done("body " + body));
  s.on("error", (e) => done("error " + (e.code || e.message)));
  s.on("close", () => done("closed " + body));
};
// The first TLS record (the whole ClientHello) as two records, cut right after the extensions length.
const split = (data) => {
  const length = data.readUInt16BE(3), hs = data.subarray(5, 5 + length);
  let o = 38; o += 1 + hs[o]; o += 2 + hs.readUInt16BE(o); o += 1 + hs[o]; o += 2;
  const record = (b) => Buffer.concat([Buffer.from([0x16, data[1], data[2], b.length >> 8, b.length & 255]), b]);
  return Buffer.concat([record(hs.subarray(0, o)), record(hs.subarray(o)), data.subarray(5 + length)]);
};
const proxy = new URL(process.env.HTTPS_PROXY);
const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: "granted.test:" + port });
req.on("connect", (res, tunnel) => {
  if (res.statusCode !== 200) return done("status " + res.statusCode);
  tunnel.on("error", () => undefined);
  if (mode === "late") return setTimeout(() => handshake(tunnel), 1500);
  const relay = net.createServer((inbound) => {
    let pending = Buffer.alloc(0);
    const onData = (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      if (pending.length < 5 || pending.length < 5 + pending.readUInt16BE(3)) return;
      inbound.off("data", onData);
      tunnel.write(split(pending));
      inbound.pipe(tunnel);
      tunnel.pipe(inbound);
    };
    inbound.on("data", onData);
    inbound.on("error", () => undefined);
    tunnel.on("close", () => inbound.destroy());
  });
  relay.listen(0, "127.0.0.1", () => handshake(net.connect(relay.address().port, "127.0.0.1")));
});
req.end();
`;

describe("attack: the TLS server name check is bypassed by how the ClientHello is sent", () => {
  it("refuses a ClientHello for another name split across two TLS records right after the extensions length", async () => {
    const lease = await h.acquire(granted({ allowFqdns: ["granted.test"] }));
    const before = sni.handshakes.length;
    const result = await h.client.env.execute({ ...h.base(), lease, command: "node", args: ["-e", TLS_CLIENT_SCRIPT, String(sni.port), "denied.test", "split"] });
    expect(result.stdout).not.toContain("secure-hello");
    expect(sni.handshakes.slice(before)).toEqual([]);
    // The same split for the granted name goes through: the proxy reassembles the hello.
    const matching = await h.client.env.execute({ ...h.base(), lease, command: "node", args: ["-e", TLS_CLIENT_SCRIPT, String(sni.port), "granted.test", "split"] });
    expect(matching.stdout).toBe("body secure-hello\n");
    expect(sni.handshakes.slice(before)).toEqual(["granted.test"]);
    await h.release(lease);
  });

  it("refuses a ClientHello for another name sent after the wait for server-speaks-first protocols", async () => {
    const lease = await h.acquire(granted({ allowFqdns: ["granted.test"] }));
    const before = sni.handshakes.length;
    const result = await h.client.env.execute({ ...h.base(), lease, command: "node", args: ["-e", TLS_CLIENT_SCRIPT, String(sni.port), "denied.test", "late"] });
    expect(result.stdout).not.toContain("secure-hello");
    expect(sni.handshakes.slice(before)).toEqual([]);
    await h.release(lease);
  });
});

/**
 * In the jail, in the background: opens `count` tunnels to granted.test:<port> through the proxy on
 * 127.0.0.1:3128 (20 at a time; each sends one byte so it is past its first bytes at once), writes
 * a JSON report to /tmp/flood.json and holds the tunnels until /tmp/stop-flood exists.
 */
const FLOOD_SCRIPT = `
const fs = require("fs"), net = require("net");
const [port, count] = process.argv.slice(1).map(Number);
const held = [];
let open = 0, refused = 0, other = 0;
const reasons = new Set();
const one = () => new Promise((resolve) => {
  const s = net.connect(3128, "127.0.0.1");
  let text = "", settled = false;
  const settle = (kind) => { if (settled) return; settled = true; if (kind === "open") open++; else if (kind === "refused") refused++; else other++; resolve(); };
  s.on("connect", () => s.write("CONNECT granted.test:" + port + " HTTP/1.1\\r\\nHost: granted.test\\r\\n\\r\\n"));
  s.on("data", (chunk) => {
    text += chunk;
    if (/^HTTP\\/1\\.1 200/.test(text)) { held.push(s); if (!settled) s.write("x"); settle("open"); }
    else if (/^HTTP\\/1\\.1 503/.test(text) && text.includes("\\r\\n\\r\\n")) { reasons.add(text.split("\\r\\n\\r\\n")[1]); settle("refused"); }
  });
  s.on("error", () => undefined);
  s.on("close", () => settle("other"));
});
(async () => {
  for (let i = 0; i < count; i += 20) {
    await Promise.all(Array.from({ length: Math.min(20, count - i) }, one));
    await new Promise((r) => setTimeout(r, 50));
  }
  fs.writeFileSync("/tmp/flood.json", JSON.stringify({ open, refused, other, reasons: [...reasons] }));
  const stop = setInterval(() => { if (fs.existsSync("/tmp/stop-flood")) { clearInterval(stop); for (const s of held) s.destroy(); process.exit(0); } }, 50);
})();
`;

function workerFds(): number {
  return fs.readdirSync(`/proc/${h.client.pid}/fd`).length;
}

describe("attack: one lease exhausts the worker's file descriptors through its egress proxy", () => {
  it("holds a tunnel flood from the jail to the per-lease cap, and a new lease still starts and works", async () => {
    const flooding = await h.acquire(granted({ allowFqdns: ["granted.test"] }));
    const baseline = workerFds();
    const started = await h.sh(flooding, `nohup node -e '${FLOOD_SCRIPT.replace(/'/g, "'\\''")}' ${silent.port} 700 >/tmp/flood.log 2>&1 &`);
    expect(started.exitCode).toBe(0);
    const report = await eventually(
      () => h.sh(flooding, "cat /tmp/flood.json 2>/dev/null"),
      (result) => result.stdout.startsWith("{"),
      60_000,
    );
    const flood = JSON.parse(report.stdout) as { open: number; refused: number; other: number; reasons: string[] };
    try {
      const held = workerFds() - baseline;
      // Each open tunnel holds two descriptors in the worker: the jail's connection and the upstream one.
      expect(held).toBeLessThanOrEqual(2 * 256 + 32);
      expect(flood.open).toBeLessThanOrEqual(256);
      expect(flood.refused).toBeGreaterThanOrEqual(700 - 256 - flood.other);
      expect(flood.reasons).toContain("Paperclip bubblewrap egress proxy: the lease already has 256 open connections through the egress proxy (its limit); close idle connections and retry.\n");
      const neighbour = await h.acquire(granted({ allowFqdns: ["granted.test"] }));
      expect((await h.sh(neighbour, "echo neighbour-ok")).stdout).toBe("neighbour-ok\n");
      expect((await h.sh(flooding, "echo still-here")).stdout).toBe("still-here\n");
      await h.release(neighbour);
    } finally {
      await h.sh(flooding, "touch /tmp/stop-flood");
    }
    expect(await eventually(workerFds, (fds) => fds <= baseline + 16, 10_000)).toBeLessThanOrEqual(baseline + 16);
    await h.release(flooding);
  });
});
