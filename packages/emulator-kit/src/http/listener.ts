import net from "node:net";
import tls from "node:tls";
import { Duplex } from "node:stream";
import type { SelfSignedCertificate } from "./tls-cert.js";

/** Where a connection goes once its protocol is known. */
export interface ConnectionSinks {
  /** HTTP/1.x (plaintext or TLS with ALPN `http/1.1` / none). */
  http1(socket: net.Socket | tls.TLSSocket): void;
  /** HTTP/2: prior-knowledge h2c, or TLS with ALPN `h2`. */
  http2(socket: net.Socket | tls.TLSSocket): void;
}

export interface ListenerOptions {
  host?: string;
  port?: number;
  /** Accept TLS on the same port too (sniffed from the first byte). */
  tls?: SelfSignedCertificate;
  /** ALPN protocols offered over TLS (default h2 then http/1.1). */
  alpn?: string[];
}

export interface Listener {
  readonly host: string;
  readonly port: number;
  /** Every open client connection (raw TCP sockets). */
  readonly sockets: ReadonlySet<net.Socket>;
  /** The raw TCP socket under a (possibly TLS) connection handed to a sink. */
  rawSocketOf(socket: net.Socket): net.Socket | undefined;
  /** Stops accepting, destroys every open connection, resolves when the port is released. */
  close(): Promise<void>;
}

const HTTP2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const TLS_HANDSHAKE_RECORD = 0x16;

/**
 * One loopback port that serves HTTP/1.1, h2c (prior knowledge) and, with `tls`, HTTPS (h2 or
 * http/1.1 by ALPN). The protocol is sniffed from the first bytes so one URL fits every client.
 */
export async function listen(sinks: ConnectionSinks, options: ListenerOptions = {}): Promise<Listener> {
  const host = options.host ?? "127.0.0.1";
  const sockets = new Set<net.Socket>();
  const rawOf = new WeakMap<net.Socket, net.Socket>();

  const tlsServer = options.tls ? tls.createServer({ key: options.tls.keyPem, cert: options.tls.certPem, ALPNProtocols: options.alpn ?? ["h2", "http/1.1"] }) : undefined;
  tlsServer?.on("secureConnection", (secure: tls.TLSSocket & { _peername?: unknown; _parentWrap?: { __raw?: net.Socket } }) => {
    // Node keeps the wrapped JS stream as `_parentWrap`; the prefixed stream knows its TCP socket.
    const raw = secure._parentWrap?.__raw;
    if (raw) {
      rawOf.set(secure, raw);
      // Over a JS stream the TLS socket cannot ask the kernel for its peer; gRPC's getPeer() and the
      // kit's per-connection faults need it.
      secure._peername = { address: raw.remoteAddress, port: raw.remotePort, family: raw.remoteFamily };
    }
    if (secure.alpnProtocol === "h2") sinks.http2(secure);
    else {
      sinks.http1(secure);
      secure.resume();
    }
  });
  tlsServer?.on("tlsClientError", (_error, secure) => secure.destroy());

  const server = net.createServer((socket) => {
    // Small streamed answers (an exec's output frames) must not wait for Nagle's delayed ACK (~25 ms each).
    socket.setNoDelay(true);
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    rawOf.set(socket, socket);
    socket.once("data", (head: Buffer) => {
      socket.pause();
      if (head[0] === TLS_HANDSHAKE_RECORD && tlsServer) {
        tlsServer.emit("connection", prefixedStream(socket, head));
        return;
      }
      socket.unshift(head);
      const prefaceLength = Math.min(head.length, HTTP2_PREFACE.length);
      if (head.subarray(0, prefaceLength).equals(HTTP2_PREFACE.subarray(0, prefaceLength))) {
        // The HTTP/2 session reads the unshifted bytes itself.
        sinks.http2(socket);
      } else {
        sinks.http1(socket);
        socket.resume();
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as net.AddressInfo;

  let closing: Promise<void> | undefined;
  return {
    host,
    port: address.port,
    sockets,
    rawSocketOf: (socket) => rawOf.get(socket),
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

/**
 * A duplex that replays `head` and then relays `socket`. Node's TLS server reads its own handle,
 * so bytes already read for sniffing must come through a JS stream.
 */
function prefixedStream(socket: net.Socket, head: Buffer): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end();
      callback();
    },
    destroy(error, callback) {
      socket.destroy();
      callback(error);
    },
  });
  (stream as Duplex & { __raw?: net.Socket }).__raw = socket;
  stream.push(head);
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on("end", () => stream.push(null));
  socket.on("close", () => stream.destroy());
  return stream;
}
