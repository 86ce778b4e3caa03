/**
 * Host side of the supervisor wire format. The supervisor (src/supervisor/supervisor.ts) is a
 * dependency-free script bound into the jail, so it carries its own copy of these constants.
 *   frame = type:u8 | length:u32be | payload
 */
export const FRAME_CONTROL = 1;
export const FRAME_STDIN = 2;
export const FRAME_STDOUT = 3;
export const FRAME_STDERR = 4;
export const FRAME_HEADER_BYTES = 5;
const MAX_CONTROL_BYTES = 16 * 1024 * 1024;

export function encodeFrame(type: number, payload: Buffer): Buffer {
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt8(type, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

export function encodeControl(message: Record<string, unknown>): Buffer {
  return encodeFrame(FRAME_CONTROL, Buffer.from(JSON.stringify(message), "utf8"));
}

/**
 * Returns a push-style decoder; throws on a malformed stream. Chunks are kept in a list and a
 * payload is copied only when it spans chunks, so bulk output is not re-copied per socket read.
 */
export function createFrameDecoder(onFrame: (type: number, payload: Buffer) => void): (chunk: Buffer) => void {
  const chunks: Buffer[] = [];
  let buffered = 0;
  const take = (length: number): Buffer => {
    const first = chunks[0]!;
    if (first.length >= length) {
      const out = first.subarray(0, length);
      if (first.length === length) chunks.shift();
      else chunks[0] = first.subarray(length);
      buffered -= length;
      return out;
    }
    const out = Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length) {
      const head = chunks[0]!;
      const part = Math.min(head.length, length - filled);
      head.copy(out, filled, 0, part);
      filled += part;
      if (part === head.length) chunks.shift();
      else chunks[0] = head.subarray(part);
    }
    buffered -= length;
    return out;
  };
  // The header of the frame being assembled, parsed once (not on every chunk that arrives).
  let pending: { type: number; length: number } | null = null;
  return (chunk) => {
    chunks.push(chunk);
    buffered += chunk.length;
    for (;;) {
      if (!pending) {
        if (buffered < FRAME_HEADER_BYTES) return;
        const header = take(FRAME_HEADER_BYTES);
        pending = { type: header.readUInt8(0), length: header.readUInt32BE(1) };
        if (pending.type < FRAME_CONTROL || pending.type > FRAME_STDERR) throw new Error(`bad frame type ${pending.type}`);
        if (pending.type === FRAME_CONTROL && pending.length > MAX_CONTROL_BYTES) throw new Error("control frame too large");
      }
      if (buffered < pending.length) return;
      const { type, length } = pending;
      pending = null;
      onFrame(type, length === 0 ? Buffer.alloc(0) : take(length));
    }
  };
}
