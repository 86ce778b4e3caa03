/**
 * Host-side egress proxy of one lease, listening on a Unix socket in the lease directory (the jail
 * reaches it through a read-only bind and the supervisor's loopback forwarder; the jail itself has no
 * network). It enforces the lease's grant:
 * - CONNECT host:port — a name must match an allowed FQDN pattern, and the tunnelled TLS ClientHello's
 *   SNI (if any) must name that same host; an IP literal must be inside an allowed CIDR.
 * - plain-HTTP absolute-URI requests — the same rule for the URL's host, and the Host header must
 *   name it too.
 * - everything else is refused with a 403 that says why. A destination outside the grant is never
 *   connected to.
 * Names are enforced by name: a granted name that DNS resolves to a loopback/link-local/unspecified
 * address is refused (it would reach the worker host's own services) unless that address is inside
 * an allowed CIDR or the name is pinned by the operator (PAPERCLIP_BUBBLEWRAP_RESOLVE).
 */
import http from "node:http";
import net from "node:net";
import fsp from "node:fs/promises";
import { cidrContains, EGRESS_GRANT_PATH, fqdnMatches, normalizeFqdn, type EgressGrant } from "@paperclip-sandbox/kit";
import type { Resolver } from "./resolver.js";
import { MAX_CLIENT_HELLO_BYTES, scanClientHello } from "./tls-sni.js";

export interface EgressDenial {
  target: string;
  reason: string;
}

export interface EgressProxyOptions {
  socketPath: string;
  grant: EgressGrant;
  resolver: Resolver & { pinned?(host: string): boolean };
  onDenied?(denial: EgressDenial): void;
  connectTimeoutMs?: number;
  /** How long a tunnel waits for the client's first bytes before passing through unchecked data. */
  helloTimeoutMs?: number;
}

export interface EgressProxy {
  socketPath: string;
  close(): Promise<void>;
}

type Decision = { ok: true; addresses: string[] } | { ok: false; reason: string };

/** Addresses a granted *name* may not reach unless a CIDR grants them: the worker host itself. */
const HOST_LOCAL_CIDRS = ["127.0.0.0/8", "0.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "::1/128", "::/128", "fe80::/10", "ff00::/8"];

export function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

export async function decideDestination(
  grant: EgressGrant,
  resolver: EgressProxyOptions["resolver"],
  rawHost: string,
): Promise<Decision> {
  const host = stripBrackets(rawHost);
  if (net.isIP(host) !== 0) {
    return grant.allowCidrs.some((cidr) => cidrContains(cidr, host))
      ? { ok: true, addresses: [host] }
      : { ok: false, reason: `address ${host} is not inside an allowed CIDR` };
  }
  const name = normalizeFqdn(host);
  if (!grant.allowFqdns.some((pattern) => fqdnMatches(pattern, name))) {
    return { ok: false, reason: `host ${name} is not in the egress grant` };
  }
  let addresses: string[];
  try {
    addresses = await resolver(name);
  } catch {
    return { ok: false, reason: `host ${name} could not be resolved` };
  }
  if (!resolver.pinned?.(name)) {
    addresses = addresses.filter(
      (address) =>
        !HOST_LOCAL_CIDRS.some((cidr) => cidrContains(cidr, address)) || grant.allowCidrs.some((cidr) => cidrContains(cidr, address)),
    );
  }
  return addresses.length > 0 ? { ok: true, addresses } : { ok: false, reason: `host ${name} resolves only to host-local addresses` };
}

function parseAuthority(authority: string): { host: string; port: number } | null {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:\[\]]+):(\d{1,5})$/.exec(authority);
  if (!match) return null;
  const port = Number(match[2]);
  return port > 0 && port < 65536 ? { host: match[1]!, port } : null;
}

/** The body of a refusal that a grant would lift: why, and where to grant access. */
function refusalBody(message: string): string {
  return `Paperclip bubblewrap egress proxy: ${message}. Grant access in ${EGRESS_GRANT_PATH} or the environment's egressAllowFqdns/egressAllowCidrs.\n`;
}

function refusal(status: number, message: string): string {
  const body = refusalBody(message);
  const reason = status === 403 ? "Forbidden" : status === 400 ? "Bad Request" : status === 502 ? "Bad Gateway" : "Error";
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

function connectFirst(addresses: string[], port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    let index = 0;
    const attempt = () => {
      const address = addresses[index++];
      if (address === undefined) {
        reject(new Error("all addresses failed"));
        return;
      }
      const socket = net.connect({ host: address, port });
      const timer = setTimeout(() => socket.destroy(new Error("timeout")), timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolve(socket);
      });
      socket.once("error", () => {
        clearTimeout(timer);
        attempt();
      });
    };
    attempt();
  });
}

export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const helloTimeoutMs = options.helloTimeoutMs ?? 1_000;
  const sockets = new Set<net.Socket>();
  const deny = (target: string, reason: string) => options.onDenied?.({ target, reason });

  const server = http.createServer((req, res) => {
    void handleRequest(req, res);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });

  async function handleRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const send = (status: number, message: string) => {
      res.writeHead(status, { "content-type": "text/plain", connection: "close" });
      res.end(`Paperclip bubblewrap egress proxy: ${message}.\n`);
    };
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      send(400, "only absolute-URI (proxy) requests and CONNECT are accepted");
      return;
    }
    if (url.protocol !== "http:") {
      send(400, `${url.protocol} requests must use CONNECT`);
      return;
    }
    const host = url.hostname;
    const hostHeader = (req.headers.host ?? "").toLowerCase();
    const headerHost = hostHeader.startsWith("[") ? hostHeader.slice(0, hostHeader.indexOf("]") + 1) : hostHeader.split(":")[0];
    if (hostHeader && normalizeFqdn(stripBrackets(headerHost ?? "")) !== normalizeFqdn(stripBrackets(host))) {
      deny(host, "Host header names a different host");
      send(403, `the Host header (${headerHost}) does not match the request's host ${host}`);
      return;
    }
    const decision = await decideDestination(options.grant, options.resolver, host);
    if (!decision.ok) {
      deny(host, decision.reason);
      res.writeHead(403, { "content-type": "text/plain", connection: "close" });
      res.end(refusalBody(decision.reason));
      return;
    }
    const port = url.port ? Number(url.port) : 80;
    let upstream: net.Socket;
    try {
      upstream = await connectFirst(decision.addresses, port, connectTimeoutMs);
    } catch {
      send(502, `could not connect to ${host}:${port}`);
      return;
    }
    // One upstream connection per request: it ends with the response or when the client goes away
    // (and with the proxy, which ends every connection it holds).
    sockets.add(upstream);
    upstream.once("close", () => sockets.delete(upstream));
    res.once("close", () => upstream.destroy());
    const headers = { ...req.headers };
    delete headers["proxy-connection"];
    delete headers["proxy-authorization"];
    const forward = http.request({
      createConnection: () => upstream,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
    });
    forward.on("response", (response) => {
      res.writeHead(response.statusCode ?? 502, response.headers);
      response.pipe(res);
    });
    forward.on("error", () => {
      if (!res.headersSent) send(502, `upstream ${host}:${port} failed`);
      else res.destroy();
    });
    req.pipe(forward);
  }

  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    void (async () => {
      client.on("error", () => undefined);
      const authority = parseAuthority(req.url ?? "");
      if (!authority) {
        client.end(refusal(400, "CONNECT needs host:port"));
        return;
      }
      const decision = await decideDestination(options.grant, options.resolver, authority.host);
      if (!decision.ok) {
        deny(`${authority.host}:${authority.port}`, decision.reason);
        client.end(refusal(403, decision.reason));
        return;
      }
      let upstream: net.Socket;
      try {
        upstream = await connectFirst(decision.addresses, authority.port, connectTimeoutMs);
      } catch {
        client.end(refusal(502, `could not connect to ${authority.host}:${authority.port}`));
        return;
      }
      sockets.add(upstream);
      upstream.once("close", () => sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
      client.on("close", () => upstream.destroy());
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      // Hold the client's bytes until the first TLS record shows which name it asks for.
      const name = net.isIP(stripBrackets(authority.host)) === 0 ? normalizeFqdn(authority.host) : null;
      let buffered = head;
      let decided = false;
      const pass = () => {
        decided = true;
        clearTimeout(timer);
        client.off("data", onData);
        upstream.pipe(client);
        if (buffered.length > 0) upstream.write(buffered);
        client.pipe(upstream);
      };
      const refuse = (reason: string) => {
        decided = true;
        clearTimeout(timer);
        deny(`${authority.host}:${authority.port}`, reason);
        client.destroy();
        upstream.destroy();
      };
      const check = () => {
        if (decided) return;
        const scan = scanClientHello(buffered);
        if (scan.kind === "need-more" && buffered.length < MAX_CLIENT_HELLO_BYTES) return;
        if (scan.kind === "tls" && name !== null && scan.serverName !== null && normalizeFqdn(scan.serverName) !== name) {
          refuse(`TLS server name ${scan.serverName} does not match the CONNECT host ${name}`);
          return;
        }
        if (scan.kind === "malformed" || scan.kind === "need-more") {
          refuse("unreadable TLS ClientHello");
          return;
        }
        pass();
      };
      const onData = (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        check();
      };
      // Server-speaks-first protocols (SSH, SMTP) send nothing first: pass them through after a wait.
      const timer = setTimeout(() => {
        if (!decided && buffered.length === 0) pass();
      }, helloTimeoutMs);
      client.on("data", onData);
      check();
    })();
  });

  server.on("upgrade", (_req: http.IncomingMessage, socket: net.Socket) => {
    socket.end(refusal(400, "plain-HTTP upgrades are not proxied; use CONNECT"));
  });

  await fsp.rm(options.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.socketPath, () => resolve());
  });
  return {
    socketPath: options.socketPath,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
