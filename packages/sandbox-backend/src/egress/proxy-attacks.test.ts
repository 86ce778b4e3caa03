// Attacks on the egress proxy found by review (project issue #11), one test each, run against the
// real proxy on a Unix socket with loopback servers as "the internet". Each failed before its fix.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EgressGrant } from "@paperclip-sandbox/kit";
import { startEgressProxy, type EgressDenial, type EgressProxy, type EgressProxyOptions } from "./proxy.js";
import { createResolver, parseResolveOverrides } from "./resolver.js";
import { selfSignedCert, startHttpServer, type TestServer } from "../test-support/servers.js";

let dir: string;
let httpServer: TestServer;
let tlsServer: SniServer;
const started: EgressProxy[] = [];

/** A TLS server (OpenSSL, through node) that records the server name each completed handshake asked for. */
interface SniServer extends TestServer {
  handshakes: (string | false | null)[];
}

async function startSniServer(): Promise<SniServer> {
  const handshakes: (string | false | null)[] = [];
  const sockets = new Set<net.Socket>();
  const server = tls.createServer(selfSignedCert("granted.test"), (socket) => {
    handshakes.push(socket.servername);
    socket.end("secure-hello");
  });
  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("tlsClientError", () => undefined);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    host: "127.0.0.1",
    port: (server.address() as net.AddressInfo).port,
    handshakes,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A resolver like DNS (nothing pinned) answering from a table. */
function stubResolver(answers: Record<string, string[]>): EgressProxyOptions["resolver"] {
  return Object.assign(async (host: string) => answers[host] ?? [], { pinned: () => false });
}

async function proxyWith(options: Partial<EgressProxyOptions> & { grant: EgressGrant }): Promise<{ proxy: EgressProxy; denials: EgressDenial[] }> {
  const denials: EgressDenial[] = [];
  const proxy = await startEgressProxy({
    socketPath: path.join(dir, `proxy-${started.length}.sock`),
    resolver: stubResolver({}),
    connectTimeoutMs: 2_000,
    onDenied: (denial) => denials.push(denial),
    ...options,
  });
  started.push(proxy);
  return { proxy, denials };
}

interface ConnectOutcome {
  status: number;
  body: string;
  socket?: net.Socket;
}

/** CONNECT through the proxy; resolves with the status and (for 200) the tunnel socket. */
function connect(proxy: EgressProxy, authority: string): Promise<ConnectOutcome> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: proxy.socketPath, method: "CONNECT", path: authority, agent: false });
    req.on("connect", (res, socket, head: Buffer) => {
      if (res.statusCode === 200) {
        // The far end may speak first: its first bytes can arrive with the proxy's answer.
        if (head.length > 0) socket.unshift(head);
        resolve({ status: 200, body: "", socket });
      } else {
        let body = head.toString();
        socket.on("data", (chunk: Buffer) => (body += chunk.toString()));
        socket.on("close", () => resolve({ status: res.statusCode ?? 0, body }));
      }
    });
    req.on("error", reject);
    req.end();
  });
}

function plainGet(proxy: EgressProxy, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: proxy.socketPath, method: "GET", path: url, headers: { host: new URL(url).host }, agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A TLS client over `transport`; resolves with what the server sent, or the error. */
function tlsExchange(transport: net.Socket, servername: string): Promise<string> {
  return new Promise((resolve) => {
    const secure = tls.connect({ socket: transport, servername, rejectUnauthorized: false });
    let text = "";
    secure.on("data", (chunk: Buffer) => (text += chunk.toString()));
    secure.on("end", () => resolve(text));
    secure.on("error", (error) => resolve(`error: ${error.message}`));
    secure.on("close", () => resolve(text));
  });
}

/** Offset in a ClientHello handshake message just past its extensions length field. */
function afterExtensionsLength(hs: Buffer): number {
  let offset = 4 + 2 + 32;
  offset += 1 + hs[offset]!;
  offset += 2 + hs.readUInt16BE(offset);
  offset += 1 + hs[offset]!;
  return offset + 2;
}

function record(type: number, version: Buffer, body: Buffer): Buffer {
  const header = Buffer.alloc(5);
  header[0] = type;
  version.copy(header, 1);
  header.writeUInt16BE(body.length, 3);
  return Buffer.concat([header, body]);
}

/** The same bytes with the first TLS record (a whole ClientHello) re-framed as records cut at `cuts(handshake)`. */
function splitFirstRecord(data: Buffer, cuts: (hs: Buffer) => number[]): Buffer {
  const length = data.readUInt16BE(3);
  const hs = data.subarray(5, 5 + length);
  const version = data.subarray(1, 3);
  const points = [0, ...cuts(hs), hs.length];
  const records = points.slice(1).map((end, i) => record(0x16, version, hs.subarray(points[i]!, end)));
  return Buffer.concat([...records, data.subarray(5 + length)]);
}

/**
 * Runs a real TLS client for `servername` whose first TLS record (its ClientHello) is re-framed by
 * `cuts` on its way into `tunnel`; the rest of the handshake is relayed untouched. The handshake
 * transcript covers handshake messages, not records, so a server completes it as usual.
 */
async function splitHelloThrough(tunnel: net.Socket, servername: string, cuts: (hs: Buffer) => number[]): Promise<string> {
  const relay = net.createServer();
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  relay.once("connection", (inbound) => {
    let pending = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      if (pending.length < 5 || pending.length < 5 + pending.readUInt16BE(3)) return;
      inbound.off("data", onData);
      tunnel.write(splitFirstRecord(pending, cuts));
      inbound.pipe(tunnel);
      tunnel.pipe(inbound);
    };
    inbound.on("data", onData);
    inbound.on("error", () => tunnel.destroy());
    tunnel.on("error", () => inbound.destroy());
    tunnel.on("close", () => inbound.destroy());
    inbound.on("close", () => tunnel.destroy());
  });
  try {
    const transport = net.connect((relay.address() as net.AddressInfo).port, "127.0.0.1");
    return await tlsExchange(transport, servername);
  } finally {
    relay.close();
  }
}

/** Whether `socket` closes within `ms`. */
function closesWithin(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (socket.closed) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function openFds(): number {
  return fs.readdirSync("/proc/self/fd").length;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-proxy-attacks-"));
  httpServer = await startHttpServer("127.0.0.1", "plain-hello");
  tlsServer = await startSniServer();
});

afterAll(async () => {
  for (const proxy of started) await proxy.close();
  await httpServer.close();
  await tlsServer.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("attack: a granted name resolving to an embedded or host-own address reaches the worker host", () => {
  it("refuses a granted name that DNS resolves to IPv4-mapped loopback (::ffff:127.0.0.1), by CONNECT and by plain GET", async () => {
    const { proxy, denials } = await proxyWith({
      grant: { allowFqdns: ["mapped.test"], allowCidrs: [] },
      resolver: stubResolver({ "mapped.test": ["::ffff:127.0.0.1"] }),
    });
    const tunnel = await connect(proxy, `mapped.test:${tlsServer.port}`);
    tunnel.socket?.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.body).toMatch(/host mapped\.test resolves only to host-local addresses \(127\.0\.0\.1: loopback\)/);
    const get = await plainGet(proxy, `http://mapped.test:${httpServer.port}/`);
    expect(get.status).toBe(403);
    expect(get.body).not.toContain("plain-hello");
    expect(denials.map((d) => d.target)).toEqual([`mapped.test:${tlsServer.port}`, "mapped.test"]);
  });

  it("refuses the hex spelling ::ffff:7f00:1 and the mapped unspecified address ::ffff:0.0.0.0", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["hex.test", "zero.test"], allowCidrs: [] },
      resolver: stubResolver({ "hex.test": ["::ffff:7f00:1"], "zero.test": ["::ffff:0.0.0.0"] }),
    });
    for (const name of ["hex.test", "zero.test"]) {
      const tunnel = await connect(proxy, `${name}:${tlsServer.port}`);
      tunnel.socket?.destroy();
      expect(tunnel.status, name).toBe(403);
      expect((await plainGet(proxy, `http://${name}:${httpServer.port}/`)).status, name).toBe(403);
    }
  });

  it("refuses NAT64 (64:ff9b::7f00:1), IPv4-compatible (::127.0.0.1) and 6to4 (2002:7f00:1::) embeddings of loopback", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["*.embedded.test"], allowCidrs: [] },
      resolver: stubResolver({ "nat64.embedded.test": ["64:ff9b::7f00:1"], "compat.embedded.test": ["::127.0.0.1"], "sixtofour.embedded.test": ["2002:7f00:1::1"] }),
    });
    for (const name of ["nat64.embedded.test", "compat.embedded.test", "sixtofour.embedded.test"]) {
      const tunnel = await connect(proxy, `${name}:${tlsServer.port}`);
      expect(tunnel.status, name).toBe(403);
      expect(tunnel.body, name).toMatch(/resolves only to host-local addresses/);
    }
  });

  it.each([
    ["IPv4-mapped", "[::ffff:127.0.0.1]"],
    ["IPv4-mapped, hex", "[::ffff:7f00:1]"],
    ["IPv4", "127.0.0.1"],
    ["unspecified", "0.0.0.0"],
    ["IPv6 loopback", "[::1]"],
  ])("refuses a %s loopback literal %s under 0.0.0.0/0 and ::/0 grants", async (_form, host) => {
    const { proxy } = await proxyWith({ grant: { allowFqdns: [], allowCidrs: ["0.0.0.0/0", "::/0"] } });
    const tunnel = await connect(proxy, `${host}:${tlsServer.port}`);
    tunnel.socket?.destroy();
    expect(tunnel.status).toBe(403);
    expect(tunnel.body).toMatch(/host-local/);
    expect((await plainGet(proxy, `http://${host}:${httpServer.port}/`)).status).toBe(403);
  });

  it("admits loopback only through a CIDR inside the loopback range, in either spelling", async () => {
    for (const cidr of ["127.0.0.0/8", "127.0.0.1/32", "::ffff:127.0.0.0/104"]) {
      const { proxy } = await proxyWith({ grant: { allowFqdns: [], allowCidrs: [cidr] } });
      for (const host of ["127.0.0.1", "[::ffff:127.0.0.1]"]) {
        const tunnel = await connect(proxy, `${host}:${tlsServer.port}`);
        expect(tunnel.status, `${cidr} ${host}`).toBe(200);
        expect(await tlsExchange(tunnel.socket!, "granted.test")).toBe("secure-hello");
      }
    }
    const { proxy } = await proxyWith({ grant: { allowFqdns: [], allowCidrs: ["0.0.0.0/1", "::ffff:0:0/96"] } });
    expect((await connect(proxy, `127.0.0.1:${tlsServer.port}`)).status).toBe(403);
  });

  const ownAddress = Object.values(os.networkInterfaces())
    .flat()
    .find((entry) => entry && !entry.internal && entry.family === "IPv4")?.address;

  it.skipIf(ownAddress === undefined)("refuses a granted name that DNS resolves to one of the worker host's own interface addresses", async () => {
    const { proxy, denials } = await proxyWith({
      grant: { allowFqdns: ["own.test"], allowCidrs: [] },
      resolver: stubResolver({ "own.test": [ownAddress!, `::ffff:${ownAddress}`] }),
    });
    const port = await closedPort();
    const tunnel = await connect(proxy, `own.test:${port}`);
    expect(tunnel.status).toBe(403);
    expect(denials.at(-1)?.reason).toMatch(/resolves only to host-local addresses .*the worker host's own address/);
  });

  it.skipIf(ownAddress === undefined)("refuses the worker host's own address under 0.0.0.0/0 and admits it through its own /32", async () => {
    const port = await closedPort();
    const wide = await proxyWith({ grant: { allowFqdns: [], allowCidrs: ["0.0.0.0/0"] } });
    const refused = await connect(wide.proxy, `${ownAddress}:${port}`);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/the worker host's own address/);
    const exact = await proxyWith({ grant: { allowFqdns: [], allowCidrs: [`${ownAddress}/32`] } });
    // Admitted: nothing listens on that port, so the proxy reports a gateway error.
    expect((await connect(exact.proxy, `${ownAddress}:${port}`)).status).toBe(502);
  });

  it("treats injected host addresses as the worker host's own, in every spelling", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["fake-own.test"], allowCidrs: ["198.51.100.0/24"] },
      resolver: stubResolver({ "fake-own.test": ["::ffff:c633:6407"] }),
      hostAddresses: () => ["198.51.100.7"],
    });
    expect((await connect(proxy, "fake-own.test:443")).status).toBe(403);
    expect((await connect(proxy, "198.51.100.7:443")).status).toBe(403);
    expect((await connect(proxy, "[::ffff:198.51.100.7]:443")).status).toBe(403);
  });

  it("still lets an operator's pin point a granted name at loopback", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["pinned.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("pinned.test=::ffff:127.0.0.1")),
    });
    const tunnel = await connect(proxy, `pinned.test:${tlsServer.port}`);
    expect(tunnel.status).toBe(200);
    expect(await tlsExchange(tunnel.socket!, "pinned.test")).toBe("secure-hello");
  });
});

describe("attack: the TLS server name check is bypassed by how the ClientHello is sent", () => {
  it("closes a tunnel whose ClientHello is split across two TLS records right after the extensions length", async () => {
    const { proxy, denials } = await proxyWith({
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
    });
    const before = tlsServer.handshakes.length;
    const tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
    expect(tunnel.status).toBe(200);
    const outcome = await splitHelloThrough(tunnel.socket!, "denied.test", (hs) => [afterExtensionsLength(hs)]);
    expect(outcome).not.toContain("secure-hello");
    expect(tlsServer.handshakes.slice(before)).toEqual([]);
    expect(denials.at(-1)?.reason).toMatch(/TLS server name denied\.test does not match the CONNECT host granted\.test/);
  });

  it("reassembles a ClientHello sent in many small records and tunnels it when its server name matches", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
    });
    const tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
    const everyFortyBytes = (hs: Buffer) => Array.from({ length: Math.floor((hs.length - 1) / 40) }, (_, i) => (i + 1) * 40);
    expect(await splitHelloThrough(tunnel.socket!, "granted.test", everyFortyBytes)).toBe("secure-hello");
  });

  it("checks the server name of a ClientHello sent after the wait for server-speaks-first protocols", async () => {
    const { proxy, denials } = await proxyWith({
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
      helloTimeoutMs: 100,
    });
    const before = tlsServer.handshakes.length;
    const tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const outcome = await tlsExchange(tunnel.socket!, "denied.test");
    expect(outcome).not.toContain("secure-hello");
    expect(tlsServer.handshakes.slice(before)).toEqual([]);
    expect(denials.at(-1)?.reason).toMatch(/TLS server name denied\.test does not match/);
  });

  it("still relays a server-speaks-first protocol at once, and the client's plain reply after it", async () => {
    const banner = net.createServer((socket) => {
      socket.write("220 banner\r\n");
      socket.once("data", (chunk: Buffer) => socket.end(`echo ${chunk.toString()}`));
    });
    await new Promise<void>((resolve) => banner.listen(0, "127.0.0.1", resolve));
    try {
      const { proxy } = await proxyWith({
        grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
        resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
        helloTimeoutMs: 120_000,
      });
      const tunnel = await connect(proxy, `granted.test:${(banner.address() as net.AddressInfo).port}`);
      const started = Date.now();
      const first = await new Promise<string>((resolve) => tunnel.socket!.once("data", (chunk: Buffer) => resolve(chunk.toString())));
      expect(first).toBe("220 banner\r\n");
      // A bound far from the alternative (a slow machine is not a failure): a proxy waiting for a hello would answer at its 120 s timeout.
      expect(Date.now() - started).toBeLessThan(30_000);
      tunnel.socket!.write("EHLO me");
      let rest = "";
      tunnel.socket!.on("data", (chunk: Buffer) => (rest += chunk.toString()));
      await new Promise((resolve) => tunnel.socket!.once("close", resolve));
      expect(rest).toBe("echo EHLO me");
    } finally {
      banner.close();
    }
  });
  it("passes a plain protocol through as soon as its first byte shows it is not TLS", async () => {
    const echo = net.createServer((socket) => socket.on("data", (chunk: Buffer) => socket.write(chunk)));
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const { proxy } = await proxyWith({
        grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
        resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
        helloTimeoutMs: 120_000,
      });
      const tunnel = await connect(proxy, `granted.test:${(echo.address() as net.AddressInfo).port}`);
      const started = Date.now();
      tunnel.socket!.write("Q");
      const echoed = await new Promise<string>((resolve) => tunnel.socket!.once("data", (chunk: Buffer) => resolve(chunk.toString())));
      expect(echoed).toBe("Q");
      // A bound far from the alternative (a slow machine is not a failure): a proxy waiting for a hello would answer at its 120 s timeout.
      expect(Date.now() - started).toBeLessThan(30_000);
      tunnel.socket!.destroy();
    } finally {
      echo.close();
    }
  });
});

/** A port on 127.0.0.1 nothing listens on (bound, read and released). */
async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * A separate process that floods the proxy, so the test process's /proc/self/fd counts only the
 * proxy's side. Modes: "idle" opens `count` connections that send nothing, 100 at a time; "tunnels"
 * starts a silent upstream on loopback and opens `count` CONNECT tunnels to silent.test:<its port>,
 * 20 at a time.
 * It prints one JSON line when every connection has settled, then holds them until stdin closes.
 */
const FLOOD_SCRIPT = `
const net = require("net");
const [socketPath, mode, countText] = process.argv.slice(1);
const count = Number(countText);
const held = [];
let refused = 0, sample = "", open = 0;
function one(payload) {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    let text = "", settled = false;
    const settle = () => { if (!settled) { settled = true; resolve(); } };
    socket.on("connect", () => { if (payload) socket.write(payload); else setTimeout(settle, 50); });
    socket.on("data", (chunk) => {
      text += chunk.toString();
      if (/^HTTP\\/1\\.1 200/.test(text)) { open++; held.push(socket); settle(); }
      else if (/^HTTP\\/1\\.1 (503|429)/.test(text) && text.includes("\\r\\n\\r\\n")) { refused++; if (!sample) sample = text; }
    });
    socket.on("error", () => undefined);
    socket.on("close", () => { if (!payload) open--; settle(); });
    if (!payload) { open++; held.push(socket); }
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  let payload = null, batch = 100, pause = 0;
  if (mode === "tunnels") {
    const silent = net.createServer((s) => { held.push(s); s.on("error", () => undefined); });
    await new Promise((r) => silent.listen(0, "127.0.0.1", r));
    payload = "CONNECT silent.test:" + silent.address().port + " HTTP/1.1\\r\\nHost: silent.test\\r\\n\\r\\n";
    batch = 20;
    pause = 60; // longer than the proxy's hello wait, so tunnels stop counting as waiting for first bytes
  }
  for (let i = 0; i < count; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, count - i) }, () => one(payload)));
    await sleep(pause);
  }
  await sleep(300);
  console.log(JSON.stringify({ open, refused, sample }));
  process.stdin.resume();
  process.stdin.on("end", () => process.exit(0));
})();
`;

interface FloodReport {
  open: number;
  refused: number;
  sample: string;
}

async function flood(socketPath: string, mode: "idle" | "tunnels", count: number): Promise<{ child: ChildProcess; report: FloodReport }> {
  const child = spawn(process.execPath, ["-e", FLOOD_SCRIPT, socketPath, mode, String(count)], { stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes("\n")) resolve(out.split("\n")[0]!);
    });
    child.once("exit", (code) => reject(new Error(`flood exited ${code}`)));
  });
  return { child, report: JSON.parse(line) as FloodReport };
}

async function endFlood(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.stdin!.end();
  await exited;
}

describe("attack: one lease exhausts the worker's file descriptors through its egress proxy", () => {
  it("holds at most the default cap of connections waiting for their first bytes from an idle flood, refusing the rest with a 503", async () => {
    const { proxy, denials } = await proxyWith({ grant: { allowFqdns: ["granted.test"], allowCidrs: [] } });
    const baseline = openFds();
    const { child, report } = await flood(proxy.socketPath, "idle", 1_500);
    try {
      const held = openFds() - baseline;
      expect(held).toBeLessThanOrEqual(64 + 16);
      expect(report.open).toBeLessThanOrEqual(64);
      expect(report.refused).toBeGreaterThan(1_000);
      expect(report.sample).toMatch(/^HTTP\/1\.1 503 /);
      expect(report.sample).toMatch(/64 connections waiting for their first bytes/);
      expect(denials.at(-1)?.reason).toMatch(/64 connections waiting for their first bytes/);
    } finally {
      await endFlood(child);
    }
  });

  it("ends a connection that sends no request head in time, freeing its place", async () => {
    const { proxy } = await proxyWith({ grant: { allowFqdns: [], allowCidrs: [] }, requestHeadTimeoutMs: 200 });
    const socket = net.connect(proxy.socketPath);
    socket.on("error", () => undefined);
    const closed = await closesWithin(socket, 3_000);
    socket.destroy();
    expect(closed).toBe(true);
  });

  it("holds at most the default cap of open connections from a tunnel flood, and serves again once it ends", async () => {
    const { proxy, denials } = await proxyWith({
      grant: { allowFqdns: ["silent.test", "granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("silent.test=127.0.0.1,granted.test=127.0.0.1")),
      helloTimeoutMs: 20,
    });
    const baseline = openFds();
    const { child, report } = await flood(proxy.socketPath, "tunnels", 600);
    try {
      // Each tunnel holds two descriptors here: the client's socket and the upstream connection.
      expect(openFds() - baseline).toBeLessThanOrEqual(2 * 256 + 16);
      expect(report.open).toBeLessThanOrEqual(256);
      expect(report.refused).toBeGreaterThanOrEqual(600 - 256);
      expect(report.sample).toMatch(/^HTTP\/1\.1 503 /);
      expect(report.sample).toMatch(/256 open connections/);
      expect(denials.some((d) => /256 open connections/.test(d.reason))).toBe(true);
      expect((await connect(proxy, `granted.test:${tlsServer.port}`)).status).toBe(503);
    } finally {
      await endFlood(child);
    }
    const deadline = Date.now() + 30_000;
    let tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
    while (tunnel.status !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
    }
    expect(tunnel.status).toBe(200);
    expect(await tlsExchange(tunnel.socket!, "granted.test")).toBe("secure-hello");
  });

  it("releases a tunnel the client closes before sending anything, though the far end waits for a ClientHello", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
      maxConnections: 4,
    });
    for (let i = 0; i < 20; i++) {
      const tunnel = await connect(proxy, `granted.test:${tlsServer.port}`);
      expect(tunnel.status, `tunnel ${i}`).toBe(200);
      tunnel.socket!.end();
      expect(await closesWithin(tunnel.socket!, 3_000), `tunnel ${i} closed`).toBe(true);
    }
  });

  it("honours a configured cap", async () => {
    const { proxy } = await proxyWith({
      grant: { allowFqdns: ["silent.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("silent.test=127.0.0.1")),
      helloTimeoutMs: 20,
      maxConnections: 10,
    });
    const { child, report } = await flood(proxy.socketPath, "tunnels", 40);
    try {
      expect(report.open).toBe(10);
      expect(report.refused).toBe(30);
      expect(report.sample).toMatch(/10 open connections/);
    } finally {
      await endFlood(child);
    }
  });

  it("opens one upstream connection at a time for requests pipelined on one client connection", async () => {
    let connections = 0;
    let open = 0;
    let peak = 0;
    const slow = http.createServer((_req, res) => setTimeout(() => res.end("slow"), 20));
    slow.on("connection", (socket: net.Socket) => {
      connections++;
      peak = Math.max(peak, ++open);
      socket.on("close", () => open--);
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const port = (slow.address() as net.AddressInfo).port;
    try {
      const { proxy } = await proxyWith({
        grant: { allowFqdns: ["slow.test"], allowCidrs: [] },
        resolver: createResolver(parseResolveOverrides("slow.test=127.0.0.1")),
      });
      const socket = net.connect(proxy.socketPath);
      const request = `GET http://slow.test:${port}/ HTTP/1.1\r\nHost: slow.test:${port}\r\n\r\n`;
      socket.write(request.repeat(30));
      let text = "";
      socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
      await new Promise((resolve) => socket.once("close", resolve));
      await new Promise((resolve) => setTimeout(resolve, 200));
      // The proxy forwards without keep-alive: the first response closes the connection, and the
      // requests queued behind it never open an upstream connection.
      expect(text.match(/HTTP\/1\.1 200/g)).toHaveLength(1);
      expect(peak).toBe(1);
      expect(connections).toBe(1);
    } finally {
      slow.closeAllConnections();
      slow.close();
    }
  });
});
