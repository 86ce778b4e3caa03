import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEgressProxy, type EgressDenial, type EgressProxy } from "./proxy.js";
import { createResolver, parseResolveOverrides } from "./resolver.js";
import { startHttpServer, startHttpsServer, type TestServer } from "../test-support/servers.js";

let dir: string;
let proxy: EgressProxy;
let httpsServer: TestServer;
let httpServer: TestServer;
const denials: EgressDenial[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-proxy-"));
  httpsServer = await startHttpsServer("127.0.0.1", "secure-hello");
  httpServer = await startHttpServer("127.0.0.1", "plain-hello");
  const pinned = createResolver(parseResolveOverrides("granted.test=127.0.0.1,also.granted.test=127.0.0.1,denied.test=127.0.0.1"));
  // "dns.granted.test" is granted but resolved by (stub) DNS to loopback, i.e. not pinned by the operator.
  const resolver = Object.assign(async (host: string) => (host === "dns.granted.test" ? ["127.0.0.1"] : pinned(host)), {
    pinned: (host: string) => pinned.pinned(host),
  });
  proxy = await startEgressProxy({
    socketPath: path.join(dir, "proxy.sock"),
    grant: { allowFqdns: ["granted.test", "*.granted.test"], allowCidrs: ["127.0.0.2/32"] },
    resolver,
    onDenied: (denial) => denials.push(denial),
  });
});

afterAll(async () => {
  await proxy.close();
  await httpsServer.close();
  await httpServer.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** CONNECT through the proxy; resolves with the status and (for 200) the tunnel socket. */
function connect(authority: string): Promise<{ status: number; body: string; socket?: net.Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: proxy.socketPath, method: "CONNECT", path: authority });
    req.on("connect", (res, socket, head: Buffer) => {
      if (res.statusCode === 200) resolve({ status: 200, body: "", socket });
      else {
        let body = head.toString();
        socket.on("data", (chunk: Buffer) => (body += chunk.toString()));
        socket.on("close", () => resolve({ status: res.statusCode ?? 0, body }));
      }
    });
    req.on("error", reject);
    req.end();
  });
}

function httpsGetThrough(socket: net.Socket, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({ socket, servername, rejectUnauthorized: false }, () => {
      secure.write(`GET / HTTP/1.1\r\nHost: ${servername}\r\nConnection: close\r\n\r\n`);
    });
    let text = "";
    secure.on("data", (chunk: Buffer) => (text += chunk.toString()));
    secure.on("end", () => resolve(text));
    secure.on("error", reject);
  });
}

function plainGet(url: string, hostHeader = url.startsWith("http://") ? new URL(url).host : undefined): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: proxy.socketPath, method: "GET", path: url, headers: hostHeader ? { host: hostHeader } : {} }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("egress proxy", () => {
  it("tunnels TLS to a granted name whose SNI matches", async () => {
    const tunnel = await connect(`granted.test:${httpsServer.port}`);
    expect(tunnel.status).toBe(200);
    expect(await httpsGetThrough(tunnel.socket!, "granted.test")).toContain("secure-hello");
  });

  it("matches wildcard grants by name", async () => {
    const tunnel = await connect(`also.granted.test:${httpsServer.port}`);
    expect(tunnel.status).toBe(200);
    expect(await httpsGetThrough(tunnel.socket!, "also.granted.test")).toContain("secure-hello");
  });

  it("closes a tunnel whose TLS server name differs from the CONNECT host (domain fronting)", async () => {
    const tunnel = await connect(`granted.test:${httpsServer.port}`);
    const outcome = await httpsGetThrough(tunnel.socket!, "denied.test").catch((error: Error) => error.message);
    expect(outcome).not.toContain("secure-hello");
    expect(denials.at(-1)?.reason).toMatch(/TLS server name denied.test does not match/);
  });

  it("refuses a name outside the grant with a 403 that says why, without connecting", async () => {
    const refused = await connect(`denied.test:${httpsServer.port}`);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/host denied.test is not in the egress grant/);
    expect(refused.body).toMatch(/executionWorkspaceSettings.networkEgress/);
  });

  it("refuses a raw IP outside the allowed CIDRs and admits one inside", async () => {
    expect((await connect(`127.0.0.1:${httpsServer.port}`)).status).toBe(403);
    const inside = await connect(`127.0.0.2:${httpsServer.port}`);
    // 127.0.0.2 is granted by CIDR; nothing listens there, so the proxy reports a gateway error.
    expect(inside.status).toBe(502);
  });

  it("refuses a granted name that DNS resolves to the worker host's loopback", async () => {
    const refused = await connect(`dns.granted.test:${httpsServer.port}`);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatch(/resolves only to host-local addresses/);
  });

  it("forwards plain-HTTP absolute-URI requests for granted names and checks the Host header", async () => {
    const ok = await plainGet(`http://granted.test:${httpServer.port}/x`);
    expect(ok).toEqual({ status: 200, body: `plain-hello host=granted.test:${httpServer.port}` });
    expect((await plainGet(`http://denied.test:${httpServer.port}/`)).status).toBe(403);
    expect((await plainGet(`http://granted.test:${httpServer.port}/`, "denied.test")).status).toBe(403);
    expect((await plainGet("/relative")).status).toBe(400);
  });

  it("drops the upstream connection of a plain-HTTP request once the proxy is closed", async () => {
    // An upstream that accepts and never answers: only the proxy can end the connection.
    const upstreams: net.Socket[] = [];
    const closed: net.Socket[] = [];
    const silent = net.createServer((socket) => {
      upstreams.push(socket);
      socket.resume(); // read the request, so the proxy's end of the connection is seen
      socket.on("close", () => closed.push(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as net.AddressInfo).port;
    const own = await startEgressProxy({
      socketPath: path.join(dir, "own.sock"),
      grant: { allowFqdns: ["granted.test"], allowCidrs: [] },
      resolver: createResolver(parseResolveOverrides("granted.test=127.0.0.1")),
    });
    try {
      const req = http.request({ socketPath: own.socketPath, method: "GET", path: `http://granted.test:${port}/slow`, headers: { host: `granted.test:${port}` } });
      req.on("error", () => undefined);
      req.end();
      const deadline = Date.now() + 30_000;
      while (upstreams.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(upstreams).toHaveLength(1);
      await own.close();
      while (closed.length === 0 && Date.now() < deadline + 2_000) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(closed).toHaveLength(1);
    } finally {
      for (const socket of upstreams) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
