import type { Readable, Writable } from "node:stream";
import type { ScriptIo } from "../transport.js";

export class TransportLimitError extends Error {
  override name = "TransportLimitError";
  readonly code = "TRANSPORT_LIMIT";
}

/** The whole of `io.stdin` as bytes (for transports that need it before the call), refusing past `maxBytes`. */
export async function collectStdin(input: ScriptIo["stdin"], maxBytes = Number.POSITIVE_INFINITY): Promise<Buffer | undefined> {
  if (input === undefined || input === null) return undefined;
  if (typeof input === "string" || Buffer.isBuffer(input)) {
    const bytes = typeof input === "string" ? Buffer.from(input, "utf8") : input;
    if (bytes.length > maxBytes) throw new TransportLimitError(`stdin of ${bytes.length} bytes exceeds this transport's ${maxBytes}-byte limit`);
    return bytes;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of input as Readable) {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
    total += bytes.length;
    if (total > maxBytes) {
      (input as Readable).destroy();
      throw new TransportLimitError(`stdin exceeds this transport's ${maxBytes}-byte limit`);
    }
    chunks.push(bytes);
  }
  return Buffer.concat(chunks, total);
}

/** Hands a finished stream's bytes to its sink: a callback, or a Writable that is then ended. */
export async function deliverAll(sink: ScriptIo["stdout"], bytes: Buffer): Promise<void> {
  if (!sink) return;
  if (typeof sink === "function") {
    if (bytes.length > 0) sink(bytes);
    return;
  }
  const writable = sink as Writable;
  await new Promise<void>((resolve) => {
    writable.once("error", () => resolve());
    writable.end(bytes, () => resolve());
  });
}

export function toBuffer(value: Buffer | string | undefined | null): Buffer {
  if (value === undefined || value === null) return Buffer.alloc(0);
  return typeof value === "string" ? Buffer.from(value, "utf8") : value;
}
