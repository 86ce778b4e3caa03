/**
 * Reaching ports on a workspace's own loopback (the jail has a network namespace of its own), as
 * Coder's agent does for app healthchecks and the app proxy: one keep-alive HTTP agent per jail,
 * whose connections are port tunnels into it.
 */
import http from "node:http";
import { openPortTunnel, type PortTunnel, type Sandbox } from "@paperclip-sandbox/sandbox-backend";

/** An app URL inside the workspace (`http://localhost:4100/healthz`): its port and path. */
export interface AppTarget {
  port: number;
  path: string;
}

export function appTarget(url: string): AppTarget | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== "http:" || !["localhost", "127.0.0.1", "0.0.0.0"].includes(parsed.hostname)) return undefined;
  const port = parsed.port === "" ? 80 : Number(parsed.port);
  return { port, path: `${parsed.pathname}${parsed.search}` };
}

/**
 * An http.Agent whose connections are tunnels into one jail (to whatever port a request names), and
 * the source of single-use tunnels for WebSocket upgrades. A tunnel's relay process takes a moment
 * to start in the jail where a real agent's local connection is instant, so one spare tunnel per
 * port is kept open ahead of the next upgrade.
 */
export class WorkspaceAgentPool extends http.Agent {
  private readonly spares = new Map<number, PortTunnel>();
  private closed = false;

  constructor(private readonly sandbox: Sandbox) {
    // Idle tunnels go before an app's own keep-alive timeout (Node's default is 5 s).
    super({ keepAlive: true, maxSockets: 16, timeout: 4_000 });
  }

  override createConnection = ((options: { port?: number | string | null }) => openPortTunnel(this.sandbox.runner, Number(options.port ?? 80))) as unknown as http.Agent["createConnection"];

  /** A tunnel for one upgrade: the spare when it is still open (a fresh one otherwise), and a new spare. */
  takeTunnel(port: number): PortTunnel {
    const spare = this.spares.get(port);
    this.spares.delete(port);
    const usable = spare && !spare.destroyed && spare.readable && spare.writable ? spare : undefined;
    if (spare && !usable) spare.destroy();
    this.refill(port);
    return usable ?? openPortTunnel(this.sandbox.runner, port);
  }

  private refill(port: number): void {
    if (this.closed) return;
    const tunnel = openPortTunnel(this.sandbox.runner, port);
    tunnel.on("error", () => undefined);
    // An app that closes idle connections (or a port nobody listens on) drops the spare.
    tunnel.on("close", () => {
      if (this.spares.get(port) === tunnel) this.spares.delete(port);
    });
    tunnel.on("end", () => tunnel.destroy());
    this.spares.set(port, tunnel);
  }

  override destroy(): void {
    this.closed = true;
    for (const tunnel of this.spares.values()) tunnel.destroy();
    this.spares.clear();
    super.destroy();
  }
}

/** GET `target` inside the workspace; resolves with the status, or rejects when nothing answers. */
export function probe(pool: http.Agent, target: AppTarget, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: "localhost", port: target.port, path: target.path, method: "GET", agent: pool, signal: AbortSignal.timeout(timeoutMs) }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("error", reject);
    request.end();
  });
}
