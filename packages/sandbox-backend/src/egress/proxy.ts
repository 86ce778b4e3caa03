/**
 * Host-side egress proxy of one lease, listening on a Unix socket in the lease directory (the jail
 * reaches it through a read-only bind and the supervisor's loopback forwarder; the jail itself has no
 * network). It enforces the lease's grant:
 * - CONNECT host:port — a name must match an allowed FQDN pattern, and the tunnelled TLS ClientHello
 *   (reassembled however many records it spans) must name that same host, or none; an IP literal
 *   must be admitted by an allowed CIDR.
 * - plain-HTTP absolute-URI requests — the same rule for the URL's host, and the Host header must
 *   name it too.
 * - everything else is refused with a 403 that says why. A destination outside the grant is never
 *   connected to.
 * Addresses are compared in canonical form (kit `egress/address`: `::ffff:127.0.0.1` is 127.0.0.1).
 * Host-local addresses (loopback, unspecified, link-local, multicast, broadcast, the worker host's
 * own interface addresses, and IPv6 forms embedding one of those) are reached only through a CIDR
 * inside their host-local range (`cidrAdmits`) or an operator pin (PAPERCLIP_BUBBLEWRAP_RESOLVE):
 * a granted name that resolves to one is refused, and `0.0.0.0/0` does not admit them.
 * One lease holds at most `maxConnections` client connections (each with at most one upstream) and
 * `maxPendingConnections` of them waiting for their first bytes; more are turned away with a 503.
 */
import http from "node:http";
import net from "node:net";
import fsp from "node:fs/promises";
import {
  cachedHostAddresses,
  canonicalIp,
  canonicalIpText,
  cidrAdmits,
  cidrContains,
  describeHostLocal,
  EGRESS_GRANT_PATH,
  formatIp,
  fqdnMatches,
  hostLocalRanges,
  normalizeFqdn,
  parseCidr,
  parseIp,
  type EgressGrant,
  type HostLocalRange,
} from "@paperclip-sandbox/kit";
import type { Resolver } from "./resolver.js";
import { ClientHelloReader } from "./tls-sni.js";

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
  /**
   * How long a new tunnel counts as waiting for its first bytes (a server-speaks-first protocol sends
   * none; its tunnel stays open and its first bytes are still checked when they come), and how long a
   * ClientHello may take to arrive in full once it has begun. Default 1000.
   */
  helloTimeoutMs?: number;
  /** Most client connections this proxy holds at once; each has at most one upstream connection. Default 256. */
  maxConnections?: number;
  /** Most connections waiting for their first bytes (a request head, or a new tunnel's first bytes) at once. Default 64. */
  maxPendingConnections?: number;
  /** How long a new connection may take to send its request head before it is closed. Default 10000. */
  requestHeadTimeoutMs?: number;
  /** The worker host's own addresses (default: `os.networkInterfaces()`, re-read at most once a second). */
  hostAddresses?: () => readonly string[];
}

export interface EgressProxy {
  socketPath: string;
  close(): Promise<void>;
}

const DEFAULT_MAX_CONNECTIONS = 256;
const DEFAULT_MAX_PENDING_CONNECTIONS = 64;

type Decision = { ok: true; addresses: string[] } | { ok: false; reason: string };

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/** The host-local range whose rule is the strictest (the narrowest), to name in a refusal. */
function narrowest(ranges: readonly HostLocalRange[]): HostLocalRange {
  return ranges.reduce((best, range) => (parseCidr(range.cidr)!.prefix > parseCidr(best.cidr)!.prefix ? range : best));
}

async function decideDestination(grant: EgressGrant, resolver: EgressProxyOptions["resolver"], rawHost: string, hostAddresses: readonly string[] = []): Promise<Decision> {
  const host = stripBrackets(rawHost);
  const literal = parseIp(host);
  if (literal) {
    const address = formatIp(canonicalIp(literal));
    if (grant.allowCidrs.some((cidr) => cidrAdmits(cidr, address, hostAddresses))) return { ok: true, addresses: [address] };
    const local = hostLocalRanges(literal, hostAddresses);
    if (local.length > 0 && grant.allowCidrs.some((cidr) => cidrContains(cidr, address))) {
      const range = narrowest(local);
      return { ok: false, reason: `address ${address} is host-local (${describeHostLocal(range)}): only a CIDR inside ${range.cidr} admits it` };
    }
    return { ok: false, reason: `address ${address} is not inside an allowed CIDR` };
  }
  if (net.isIP(host) !== 0) return { ok: false, reason: `address ${host} has a zone index, which the proxy does not route` };
  const name = normalizeFqdn(host);
  if (!grant.allowFqdns.some((pattern) => fqdnMatches(pattern, name))) {
    return { ok: false, reason: `host ${name} is not in the egress grant` };
  }
  let answers: string[];
  try {
    answers = await resolver(name);
  } catch {
    return { ok: false, reason: `host ${name} could not be resolved` };
  }
  const addresses = [...new Set(answers.map(canonicalIpText).filter((address): address is string => address !== null))];
  if (addresses.length === 0) return { ok: false, reason: `host ${name} could not be resolved` };
  // An operator's pin may point anywhere, loopback included.
  if (resolver.pinned?.(name)) return { ok: true, addresses };
  const kept: string[] = [];
  const refused: string[] = [];
  for (const address of addresses) {
    const local = hostLocalRanges(parseIp(address)!, hostAddresses);
    if (local.length === 0 || grant.allowCidrs.some((cidr) => cidrAdmits(cidr, address, hostAddresses))) kept.push(address);
    else refused.push(`${address}: ${describeHostLocal(narrowest(local))}`);
  }
  return kept.length > 0 ? { ok: true, addresses: kept } : { ok: false, reason: `host ${name} resolves only to host-local addresses (${refused.join(", ")})` };
}

/** Whether a Host header's host and a request's host name the same destination. */
function sameHost(a: string, b: string): boolean {
  const ipA = canonicalIpText(stripBrackets(a));
  const ipB = canonicalIpText(stripBrackets(b));
  if (ipA !== null || ipB !== null) return ipA === ipB;
  return normalizeFqdn(a) === normalizeFqdn(b);
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

const STATUS_TEXT: Record<number, string> = { 400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 503: "Service Unavailable" };

function rawResponse(status: number, body: string): string {
  return `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

function refusal(status: number, message: string): string {
  return rawResponse(status, refusalBody(message));
}

/**
 * Sends a last answer and half-closes; the connection ends when the client closes its side (having
 * read the answer), or after a second at the most, so a client that never closes holds nothing.
 */
function answerAndClose(socket: net.Socket, response: string): void {
  socket.end(response);
  const timer = setTimeout(() => socket.destroy(), 1_000).unref();
  socket.once("close", () => clearTimeout(timer));
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
  const maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const maxPending = options.maxPendingConnections ?? DEFAULT_MAX_PENDING_CONNECTIONS;
  const requestHeadTimeoutMs = options.requestHeadTimeoutMs ?? 10_000;
  const hostAddresses = options.hostAddresses ?? cachedHostAddresses(1_000);
  /** Every socket the proxy holds (clients and upstreams), ended on close. */
  const sockets = new Set<net.Socket>();
  const clients = new Set<net.Socket>();
  /** Connections waiting for their first bytes, with the timer that ends the wait. */
  const pending = new Map<net.Socket, NodeJS.Timeout>();
  /** Per client connection, the end of its previous plain-HTTP request: one upstream at a time. */
  const lastRequest = new WeakMap<net.Socket, Promise<void>>();
  /** Connections answered with a 503 and about to close: nothing they send is acted on. */
  const turnedAway = new WeakSet<net.Socket>();
  let closingTurnedAway = 0;
  const deny = (target: string, reason: string) => options.onDenied?.({ target, reason });
  const decide = (host: string) => decideDestination(options.grant, options.resolver, host, hostAddresses());

  const wait = (socket: net.Socket, ms: number, onTimeout: () => void) => {
    const timer = setTimeout(() => {
      pending.delete(socket);
      onTimeout();
    }, ms);
    timer.unref();
    pending.set(socket, timer);
  };
  const stopWaiting = (socket: net.Socket) => {
    clearTimeout(pending.get(socket));
    pending.delete(socket);
  };

  /** Answers a connection over a limit at once and closes it, so it holds no descriptor for long. */
  const turnAway = (socket: net.Socket, reason: string) => {
    turnedAway.add(socket);
    deny("egress proxy", reason);
    const response = rawResponse(503, `Paperclip bubblewrap egress proxy: ${reason}; close idle connections and retry.\n`);
    if (closingTurnedAway >= maxPending) {
      // A flood: free the descriptor as soon as the answer is written.
      socket.write(response, () => socket.destroy());
      return;
    }
    closingTurnedAway++;
    socket.once("close", () => closingTurnedAway--);
    answerAndClose(socket, response);
  };

  const server = http.createServer((req, res) => {
    if (turnedAway.has(req.socket)) return;
    stopWaiting(req.socket);
    void handleRequest(req, res);
  });
  server.on("connection", (socket: net.Socket) => {
    socket.on("error", () => undefined);
    if (clients.size >= maxConnections) {
      turnAway(socket, `the lease already has ${maxConnections} open connections through the egress proxy (its limit)`);
      return;
    }
    if (pending.size >= maxPending) {
      turnAway(socket, `the lease already has ${maxPending} connections waiting for their first bytes (the egress proxy's limit)`);
      return;
    }
    clients.add(socket);
    sockets.add(socket);
    wait(socket, requestHeadTimeoutMs, () => socket.destroy());
    socket.once("close", () => {
      clients.delete(socket);
      sockets.delete(socket);
      stopWaiting(socket);
    });
  });
  server.on("clientError", (_error: Error, socket: net.Socket) => socket.destroy());

  async function handleRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const previous = lastRequest.get(req.socket);
    const finished = new Promise<void>((resolve) => res.once("close", resolve));
    lastRequest.set(req.socket, finished);
    if (previous) await previous;
    if (!req.socket.writable) return; // the previous response ended the connection
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
    if (hostHeader && !sameHost(headerHost ?? "", host)) {
      deny(host, "Host header names a different host");
      send(403, `the Host header (${headerHost}) does not match the request's host ${host}`);
      return;
    }
    const decision = await decide(host);
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
    if (turnedAway.has(client)) return;
    stopWaiting(client);
    void (async () => {
      const authority = parseAuthority(req.url ?? "");
      if (!authority) {
        answerAndClose(client, refusal(400, "CONNECT needs host:port"));
        return;
      }
      const target = `${authority.host}:${authority.port}`;
      const decision = await decide(authority.host);
      if (!decision.ok) {
        deny(target, decision.reason);
        answerAndClose(client, refusal(403, decision.reason));
        return;
      }
      let upstream: net.Socket;
      try {
        upstream = await connectFirst(decision.addresses, authority.port, connectTimeoutMs);
      } catch {
        answerAndClose(client, refusal(502, `could not connect to ${target}`));
        return;
      }
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      sockets.add(upstream);
      upstream.once("close", () => sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
      client.on("close", () => upstream.destroy());
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      // The server's bytes flow at once (server-speaks-first protocols); the client's are held until
      // their first bytes show what they are, and a TLS ClientHello which name it asks for.
      upstream.pipe(client);
      inspectFirstBytes(client, upstream, target, parseIp(stripBrackets(authority.host)) ? null : normalizeFqdn(authority.host), head);
    })();
  });

  function inspectFirstBytes(client: net.Socket, upstream: net.Socket, target: string, name: string | null, head: Buffer): void {
    const reader = new ClientHelloReader();
    const held: Buffer[] = [];
    let decided = false;
    let helloTimer: NodeJS.Timeout | undefined;
    const settle = () => {
      decided = true;
      stopWaiting(client);
      clearTimeout(helloTimer);
      client.off("data", onData);
    };
    const pass = () => {
      settle();
      for (const chunk of held) upstream.write(chunk);
      client.pipe(upstream);
    };
    const refuse = (reason: string) => {
      settle();
      deny(target, reason);
      client.destroy();
      upstream.destroy();
    };
    const onData = (chunk: Buffer) => {
      if (decided) return;
      if (held.length === 0 && !pending.has(client)) {
        // First bytes after the wait for server-speaks-first protocols: they are checked all the same.
        helloTimer = setTimeout(() => refuse(`TLS ClientHello incomplete after ${helloTimeoutMs} ms`), helloTimeoutMs);
        helloTimer.unref();
      }
      held.push(chunk);
      const scan = reader.push(chunk);
      if (scan.kind === "need-more") return;
      if (scan.kind === "not-tls") pass();
      else if (scan.kind === "malformed") refuse(`unreadable TLS ClientHello: ${scan.reason}`);
      else if (scan.encryptedHello && name !== null) refuse(`TLS ClientHello to ${name} uses Encrypted Client Hello, which hides the server name`);
      else if (name !== null && scan.serverName !== null && normalizeFqdn(scan.serverName) !== name) {
        refuse(`TLS server name ${scan.serverName} does not match the CONNECT host ${name}`);
      } else pass();
    };
    wait(client, helloTimeoutMs, () => {
      // Nothing yet: a server-speaks-first protocol; the tunnel stays, no longer counted as waiting.
      // A ClientHello begun but not finished in time is refused.
      if (!decided && held.length > 0) refuse(`TLS ClientHello incomplete after ${helloTimeoutMs} ms`);
    });
    client.on("data", onData);
    client.once("end", () => {
      if (decided) return;
      // The client closed its side before its first bytes told anything: a ClientHello begun is
      // refused; with nothing sent, the close is passed on (the tunnel ends when the far end does).
      if (held.length > 0) refuse("the client closed the tunnel in the middle of its TLS ClientHello");
      else {
        settle();
        upstream.end();
      }
    });
    client.once("close", () => {
      decided = true;
      clearTimeout(helloTimer);
    });
    if (head.length > 0) onData(head);
  }

  server.on("upgrade", (_req: http.IncomingMessage, socket: net.Socket) => {
    if (turnedAway.has(socket)) return;
    stopWaiting(socket);
    answerAndClose(socket, refusal(400, "plain-HTTP upgrades are not proxied; use CONNECT"));
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
        for (const timer of pending.values()) clearTimeout(timer);
        pending.clear();
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
