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

/** GET `target` inside the workspace; resolves with the status and `Location`, or rejects when nothing answers. */
function get(pool: http.Agent, target: AppTarget, signal: AbortSignal): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: "localhost", port: target.port, path: target.path, method: "GET", agent: pool, signal }, (response) => {
      response.resume();
      response.on("end", () => resolve({ status: response.statusCode ?? 0, location: response.headers.location || undefined }));
    });
    request.on("error", reject);
    request.end();
  });
}

/** The redirects Go's http.Client follows (net/http `redirectBehavior`); any other 3xx is the answer. */
const FOLLOWED = new Set([301, 302, 303, 307, 308]);
/** Go's `defaultCheckRedirect`: an error once 10 requests were sent, so the 10th redirect in a row fails the check. */
const MAX_REQUESTS = 10;

/**
 * GET `url` inside the workspace as the agent's healthcheck does (`http.DefaultClient`): redirects
 * followed as Go's client does, within `timeoutMs` for the whole chain; resolves with the final
 * status, rejects when nothing answers, a `Location` does not parse or too many redirects. A URL off
 * the workspace's loopback (or a redirect there) fails: the workspace has no outbound network.
 */
export async function probe(pool: http.Agent, url: string, timeoutMs: number): Promise<number> {
  const signal = AbortSignal.timeout(timeoutMs);
  let current = new URL(url);
  for (let sent = 1; ; sent++) {
    const target = appTarget(current.href);
    if (!target) throw new Error(`${current.href} is not on the workspace's loopback`);
    const { status, location } = await get(pool, target, signal);
    // A 3xx without a Location is the answer, as in Go.
    if (!FOLLOWED.has(status) || location === undefined) return status;
    const next = new URL(location, current);
    if (sent >= MAX_REQUESTS) throw new Error(`stopped after ${MAX_REQUESTS} redirects`);
    current = next;
  }
}
