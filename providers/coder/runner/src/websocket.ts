/**
 * The server side of RFC 6455, just what the runner's stream route needs and nothing it does not:
 * the opening handshake, masked client frames (fragmented or not), binary and text messages, ping,
 * pong and the closing handshake, a cap on message size, and back-pressure both ways. The runner is
 * copied into workspaces as plain files, so it carries no dependency (not even `ws`).
 */
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;
/** Output waiting in the socket past this pauses the producer (`writable()` says false). */
const HIGH_WATER = 1024 * 1024;

export interface WebSocketOptions {
  /** Largest message accepted (bytes); a bigger one closes the connection with 1009. */
  maxMessageBytes: number;
}

/** Why a handshake was refused: an HTTP status and a short reason. */
export class HandshakeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One accepted connection. Events: `message(data: Buffer, binary: boolean)`, `drain` (the socket
 * took what was queued), `close(code: number)` once, after which nothing is sent or received.
 */
export class WebSocketConnection extends EventEmitter {
  // Bytes received but not yet parsed, joined only once a whole frame (or its header) is there:
  // a large message arriving in many small chunks is copied once, not once per chunk.
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private needed = 2;
  private fragments: Buffer[] = [];
  private fragmentsBytes = 0;
  private fragmentOpcode = 0;
  private closing = false;
  private closed = false;

  constructor(
    private readonly socket: Duplex,
    private readonly options: WebSocketOptions,
  ) {
    super();
    socket.on("data", (chunk: Buffer) => this.receive(chunk));
    socket.on("drain", () => this.emit("drain"));
    socket.on("error", () => this.finish(1006));
    socket.on("close", () => this.finish(1006));
    socket.on("end", () => this.finish(1006));
  }

  /** False while the socket holds more than the high-water mark (wait for `drain`). */
  writable(): boolean {
    return !this.closed && this.socket.writableLength < HIGH_WATER;
  }

  send(data: Buffer, binary = true): boolean {
    if (this.closing || this.closed) return false;
    this.socket.write(frame(binary ? OP_BINARY : OP_TEXT, data));
    return this.writable();
  }

  /** Starts the closing handshake (the peer's answer, or a short wait, ends the socket). */
  close(code = 1000, reason = ""): void {
    if (this.closing || this.closed) return;
    this.closing = true;
    const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
    payload.writeUInt16BE(code, 0);
    payload.write(reason, 2);
    this.socket.write(frame(OP_CLOSE, payload));
    const timer = setTimeout(() => this.socket.destroy(), 2_000);
    timer.unref();
    this.socket.end();
  }

  /** Stops reading from the peer (its messages wait in the kernel) until `resume`. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  private finish(code: number): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.emit("close", code);
  }

  private fail(code: number): void {
    this.close(code);
    this.finish(code);
  }

  private receive(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < this.needed) return;
    let buffer = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    for (;;) {
      const parsed = parseFrame(buffer, this.options.maxMessageBytes);
      if (parsed === "too-big") return this.fail(1009);
      if (parsed === "protocol") return this.fail(1002);
      if ("needed" in parsed) {
        this.needed = parsed.needed;
        if (buffer.length > 0) {
          this.pending.push(buffer);
          this.pendingBytes = buffer.length;
        }
        return;
      }
      buffer = buffer.subarray(parsed.consumed);
      if (!this.handle(parsed.fin, parsed.opcode, parsed.payload)) return;
    }
  }

  /** False when the connection ended while handling the frame. */
  private handle(fin: boolean, opcode: number, payload: Buffer): boolean {
    if (opcode === OP_PING) {
      if (!this.closing) this.socket.write(frame(OP_PONG, payload));
      return true;
    }
    if (opcode === OP_PONG) return true;
    if (opcode === OP_CLOSE) {
      const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      this.close(code === 1005 ? 1000 : code);
      this.finish(code);
      return false;
    }
    if (opcode !== OP_CONTINUATION && opcode !== OP_TEXT && opcode !== OP_BINARY) {
      this.fail(1002);
      return false;
    }
    if (opcode !== OP_CONTINUATION) {
      if (this.fragments.length > 0) {
        this.fail(1002);
        return false;
      }
      this.fragmentOpcode = opcode;
    } else if (this.fragments.length === 0) {
      this.fail(1002);
      return false;
    }
    this.fragments.push(payload);
    this.fragmentsBytes += payload.length;
    if (this.fragmentsBytes > this.options.maxMessageBytes) {
      this.fail(1009);
      return false;
    }
    if (!fin) return true;
    const message = this.fragments.length === 1 ? this.fragments[0]! : Buffer.concat(this.fragments, this.fragmentsBytes);
    this.fragments = [];
    this.fragmentsBytes = 0;
    if (!this.closing) this.emit("message", message, this.fragmentOpcode === OP_BINARY);
    return !this.closed;
  }
}

/** Completes the opening handshake on an `upgrade` request, or throws `HandshakeError` (nothing written). */
export function acceptWebSocket(request: IncomingMessage, socket: Duplex, head: Buffer, options: WebSocketOptions): WebSocketConnection {
  const key = request.headers["sec-websocket-key"];
  if (request.method !== "GET") throw new HandshakeError(405, "a WebSocket handshake is a GET");
  if (String(request.headers.upgrade ?? "").toLowerCase() !== "websocket") throw new HandshakeError(400, "expected Upgrade: websocket");
  if (request.headers["sec-websocket-version"] !== "13") throw new HandshakeError(426, "only WebSocket version 13 is spoken");
  if (typeof key !== "string" || Buffer.from(key, "base64").length !== 16) throw new HandshakeError(400, "missing or malformed Sec-WebSocket-Key");
  const accept = createHash("sha1")
    .update(key + GUID)
    .digest("base64");
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  const connection = new WebSocketConnection(socket, options);
  if (head.length > 0) socket.unshift(head);
  return connection;
}

/** Writes an HTTP error instead of the upgrade (the handshake was refused). */
export function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: "bad_handshake", message });
  socket.end(`HTTP/1.1 ${status} Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

/** A server frame (never masked). */
function frame(opcode: number, payload: Buffer): Buffer {
  const length = payload.length;
  const header = length < 126 ? Buffer.alloc(2) : length < 65_536 ? Buffer.alloc(4) : Buffer.alloc(10);
  header[0] = 0x80 | opcode;
  if (length < 126) header[1] = length;
  else if (length < 65_536) {
    header[1] = 126;
    header.writeUInt16BE(length, 2);
  } else {
    header[1] = 127;
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  return Buffer.concat([header, payload]);
}

/** A frame, how many bytes the next parse needs at least, or why the connection must end. */
type Parsed = { fin: boolean; opcode: number; payload: Buffer; consumed: number } | { needed: number } | "too-big" | "protocol";

/** One client frame from the front of `buffer` (unmasked in a copy). */
function parseFrame(buffer: Buffer, maxBytes: number): Parsed {
  if (buffer.length < 2) return { needed: 2 };
  const fin = (buffer[0]! & 0x80) !== 0;
  if ((buffer[0]! & 0x70) !== 0) return "protocol"; // no extension was negotiated
  const opcode = buffer[0]! & 0x0f;
  const masked = (buffer[1]! & 0x80) !== 0;
  if (!masked) return "protocol"; // clients must mask
  let length = buffer[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return { needed: 4 };
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return { needed: 10 };
    const big = buffer.readBigUInt64BE(2);
    if (big > BigInt(maxBytes)) return "too-big";
    length = Number(big);
    offset = 10;
  }
  if (opcode >= 0x8 && (length > 125 || !fin)) return "protocol";
  if (length > maxBytes) return "too-big";
  if (buffer.length < offset + 4 + length) return { needed: offset + 4 + length };
  const mask = buffer.subarray(offset, offset + 4);
  const payload = Buffer.from(buffer.subarray(offset + 4, offset + 4 + length));
  for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
  return { fin, opcode, payload, consumed: offset + 4 + length };
}
