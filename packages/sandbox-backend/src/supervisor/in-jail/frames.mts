/**
 * The supervisor wire format, shared by the in-jail supervisor and the host client (the host
 * imports this module too, so there is one copy of it). Binary and length-prefixed, so bulk tar
 * streams carry no base64/JSON cost:
 *   frame = type:u8 | length:u32be | payload
 *   CONTROL (1): UTF-8 JSON object, either direction
 *   STDIN (2) client->supervisor; STDOUT (3) / STDERR (4) supervisor->client: raw bytes
 * Every frame length is checked against a cap before anything is buffered for it.
 */
import type net from "node:net";

export const FRAME_CONTROL = 1;
export const FRAME_STDIN = 2;
export const FRAME_STDOUT = 3;
export const FRAME_STDERR = 4;
const FRAME_HEADER_BYTES = 5;
/** Largest control frame either side accepts (a directory listing is the biggest reply). */
const MAX_CONTROL_BYTES = 16 * 1024 * 1024;
/** Largest data frame either side accepts (writers send at most 256 KiB per frame). */
const MAX_DATA_BYTES = 1024 * 1024;

export interface FrameLimits {
  /** Cap of a control frame on this stream (default MAX_CONTROL_BYTES). */
  maxControlBytes?: number;
  /** Cap of a data frame (default MAX_DATA_BYTES). */
  maxDataBytes?: number;
  /** Frame types this stream may carry (default all four). */
  types?: ReadonlySet<number>;
}

export class FrameError extends Error {
  override name = "FrameError";
}

export function encodeFrame(type: number, payload: Buffer): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

export function encodeControl(message: Record<string, unknown>): Buffer {
  return encodeFrame(FRAME_CONTROL, Buffer.from(JSON.stringify(message), "utf8"));
}

/** Header and payload go out as one writev: no copy of bulk output into a joined buffer. */
export function writeFrame(sock: net.Socket, type: number, payload: Buffer): boolean {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  sock.cork();
  sock.write(header);
  const ok = sock.write(payload);
  process.nextTick(() => sock.uncork());
  return ok;
}

/** Writes a control message unless the socket is already closing; returns the write's backpressure result. */
export function writeControl(sock: net.Socket, message: Record<string, unknown>): boolean {
  if (sock.destroyed || !sock.writable) return false;
  return writeFrame(sock, FRAME_CONTROL, Buffer.from(JSON.stringify(message), "utf8"));
}

/** A control payload as a JSON object with a string `op`; throws FrameError otherwise. */
export function parseControl(payload: Buffer): Record<string, unknown> & { op: string } {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString("utf8"));
  } catch {
    throw new FrameError("control frame is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value) || typeof (value as { op?: unknown }).op !== "string") {
    throw new FrameError("control frame is not an object with an op");
  }
  return value as Record<string, unknown> & { op: string };
}

/**
 * Returns a push-style decoder; throws FrameError on a malformed stream. Chunks are kept in a list
 * and a payload is copied only when it spans chunks, so bulk output is not re-copied per socket read.
 */
export function createFrameDecoder(onFrame: (type: number, payload: Buffer) => void, limits: FrameLimits = {}): (chunk: Buffer) => void {
  const maxControl = limits.maxControlBytes ?? MAX_CONTROL_BYTES;
  const maxData = limits.maxDataBytes ?? MAX_DATA_BYTES;
  // Queue of received chunks from `head` on (an index, not shift(): a payload assembled from many
  // small reads must stay linear).
  let chunks: Buffer[] = [];
  let head = 0;
  let buffered = 0;
  const dropConsumed = () => {
    if (head === chunks.length) {
      chunks = [];
      head = 0;
    } else if (head > 1024) {
      chunks = chunks.slice(head);
      head = 0;
    }
  };
  const take = (length: number): Buffer => {
    const first = chunks[head]!;
    if (first.length >= length) {
      const out = first.subarray(0, length);
      if (first.length === length) head += 1;
      else chunks[head] = first.subarray(length);
      buffered -= length;
      dropConsumed();
      return out;
    }
    const out = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const chunk = chunks[head]!;
      const part = Math.min(chunk.length, length - filled);
      chunk.copy(out, filled, 0, part);
      filled += part;
      if (part === chunk.length) head += 1;
      else chunks[head] = chunk.subarray(part);
    }
    buffered -= length;
    dropConsumed();
    return out;
  };
  // The header of the frame being assembled, parsed once (not on every chunk that arrives).
  let pending: { type: number; length: number } | null = null;
  let broken = false;
  return (chunk) => {
    if (broken) throw new FrameError("stream already failed");
    chunks.push(chunk);
    buffered += chunk.length;
    for (;;) {
      if (!pending) {
        if (buffered < FRAME_HEADER_BYTES) return;
        const header = take(FRAME_HEADER_BYTES);
        pending = { type: header.readUInt8(0), length: header.readUInt32BE(1) };
        if (pending.type < FRAME_CONTROL || pending.type > FRAME_STDERR || (limits.types && !limits.types.has(pending.type))) {
          broken = true;
          throw new FrameError(`unexpected frame type ${pending.type}`);
        }
        const cap = pending.type === FRAME_CONTROL ? maxControl : maxData;
        if (pending.length > cap) {
          broken = true;
          throw new FrameError(`${pending.type === FRAME_CONTROL ? "control" : "data"} frame too large (${pending.length} bytes, cap ${cap})`);
        }
      }
      if (buffered < pending.length) return;
      const { type, length } = pending;
      pending = null;
      onFrame(type, length === 0 ? Buffer.alloc(0) : take(length));
    }
  };
}
