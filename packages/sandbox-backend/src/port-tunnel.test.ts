// A tunnel to a port on the jail's own loopback: what a vendor's app proxy does for a workspace app.
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPortTunnel, PortTunnelError } from "./port-tunnel.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Awaited<ReturnType<World["create"]>>;

// A tiny HTTP app inside the jail (node from the host tree), echoing method, path and body.
const APP = `require("http").createServer((q,s)=>{let b=[];q.on("data",c=>b.push(c));q.on("end",()=>{s.setHeader("x-seen-cookie",q.headers.cookie||"");s.end(q.method+" "+q.url+" "+Buffer.concat(b).length)})}).listen(8123,"127.0.0.1",()=>console.log("up"))`;

beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "tunnel" });
  const app = await sandbox.exec({ argv: ["node", "-e", APP], detached: true });
  await new Promise<void>((resolve) => {
    const sub = app.subscribe({ stdout: 0 }, { onData: () => (sub.close(), resolve()) });
  });
});
afterAll(async () => {
  await world?.close();
});

function get(agent: http.Agent | undefined, path: string, body?: Buffer): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: "sandbox", path, method: body ? "POST" : "GET", agent, createConnection: agent ? undefined : () => openPortTunnel(sandbox.runner, 8123) }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString(), headers: response.headers }));
    });
    request.on("error", reject);
    request.end(body);
  });
}

describe("port tunnel", () => {
  it("carries an HTTP exchange to a port only the jail can reach, request body included", async () => {
    expect((await get(undefined, "/a?b=1")).text).toBe("GET /a?b=1 0");
    expect((await get(undefined, "/upload", Buffer.alloc(3 * 1024 * 1024, 7))).text).toBe(`POST /upload ${3 * 1024 * 1024}`);
  });

  it("serves several requests over one kept-alive tunnel", async () => {
    class TunnelAgent extends http.Agent {
      opened = 0;
      override createConnection = () => {
        this.opened++;
        return openPortTunnel(sandbox.runner, 8123) as never;
      };
    }
    const agent = new TunnelAgent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 3; i++) expect((await get(agent, `/${i}`)).text).toBe(`GET /${i} 0`);
    expect(agent.opened).toBe(1);
    agent.destroy();
  });

  it("fails with ECONNREFUSED when nothing listens on the port", async () => {
    const tunnel = openPortTunnel(sandbox.runner, 8124);
    const error = await new Promise<Error>((resolve) => tunnel.on("error", resolve));
    expect(error).toBeInstanceOf(PortTunnelError);
    expect((error as PortTunnelError).code).toBe("ECONNREFUSED");
  });

  it("refuses a port out of range", () => {
    expect(() => openPortTunnel(sandbox.runner, 0)).toThrow(RangeError);
    expect(() => openPortTunnel(sandbox.runner, 70_000)).toThrow(RangeError);
  });
});
