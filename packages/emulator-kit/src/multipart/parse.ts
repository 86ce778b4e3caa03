import { once } from "node:events";
import { PassThrough, type Readable } from "node:stream";
import { HttpError } from "../http/errors.js";
import { parseHeaderParams } from "./headers.js";

export interface MultipartLimits {
  /** Parts in one body (default 1,000). */
  maxParts?: number;
  /** Bytes in one part's body (default 100 MiB). */
  maxPartBytes?: number;
  /** Bytes in the whole body (default 1 GiB). */
  maxTotalBytes?: number;
  /** Bytes of one part's header block (default 16 KiB). */
  maxHeaderBytes?: number;
}

export interface MultipartPart {
  /** The `name` of its Content-Disposition. */
  readonly name: string;
  /** The `filename` (or decoded `filename*`), exactly as sent: full paths are kept. */
  readonly filename: string | undefined;
  readonly contentType: string;
  /** Part headers, names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** The part body, streamed; unread data is discarded when the next part is requested. */
  readonly body: Readable;
  bytes(): Promise<Buffer>;
  text(): Promise<string>;
}

export class MultipartError extends HttpError {
  constructor(status: 400 | 413, message: string) {
    super(status, message, { code: status === 413 ? "multipart_too_large" : "multipart_malformed" });
    this.name = "MultipartError";
  }
}

const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");

/**
 * Streams the parts of a multipart body. Parsing runs one part ahead of the consumer at most, and
 * every limit is checked as bytes arrive, so a hostile upload cannot make it buffer without bound.
 */
export async function* parseMultipart(source: AsyncIterable<Buffer | string>, boundary: string, limits: MultipartLimits = {}): AsyncGenerator<MultipartPart> {
  const maxParts = limits.maxParts ?? 1000;
  const maxPartBytes = limits.maxPartBytes ?? 100 * 1024 * 1024;
  const maxTotalBytes = limits.maxTotalBytes ?? 1024 * 1024 * 1024;
  const maxHeaderBytes = limits.maxHeaderBytes ?? 16 * 1024;
  if (!boundary || boundary.length > 70) throw new MultipartError(400, "multipart boundary: must be 1..70 characters");
  const delimiter = Buffer.from(`\r\n--${boundary}`);

  // Hand-off between the parsing driver and this generator: one part at a time.
  type Slot = { part: MultipartPart; taken: () => void } | { done: true } | { error: Error };
  let pending: ((slot: Slot) => void) | undefined;
  let queued: Slot | undefined;
  const offer = (slot: Slot) => {
    if (pending) {
      const wake = pending;
      pending = undefined;
      wake(slot);
    } else queued = slot;
  };
  const next = () =>
    new Promise<Slot>((resolve) => {
      if (queued) {
        const slot = queued;
        queued = undefined;
        resolve(slot);
      } else pending = resolve;
    });

  let current: PassThrough | undefined;
  let stopped = false;

  const drive = async () => {
    // A virtual CRLF lets the first delimiter be found like every other one.
    let buffer: Buffer = Buffer.from(CRLF);
    let total = 0;
    let state: "preamble" | "after-delimiter" | "headers" | "body" | "epilogue" = "preamble";
    let parts = 0;
    let partBytes = 0;

    const emit = async (data: Buffer) => {
      if (data.length === 0 || !current) return;
      partBytes += data.length;
      if (partBytes > maxPartBytes) throw new MultipartError(413, `multipart part exceeds the ${maxPartBytes}-byte limit`);
      if (!current.write(data) && !current.destroyed) await drainOrClose(current);
    };

    const step = async (): Promise<boolean> => {
      switch (state) {
        case "preamble": {
          const at = buffer.indexOf(delimiter);
          if (at < 0) {
            buffer = buffer.subarray(Math.max(0, buffer.length - delimiter.length + 1));
            return false;
          }
          buffer = buffer.subarray(at + delimiter.length);
          state = "after-delimiter";
          return true;
        }
        case "after-delimiter": {
          if (buffer.length < 2) return false;
          if (buffer[0] === 0x2d && buffer[1] === 0x2d) {
            current?.end();
            current = undefined;
            state = "epilogue";
            return true;
          }
          const eol = buffer.indexOf(CRLF);
          if (eol < 0) {
            if (buffer.length > 256) throw new MultipartError(400, "multipart delimiter line is not terminated");
            return false;
          }
          // Transport padding (spaces, tabs) may follow a delimiter.
          if (!/^[ \t]*$/.test(buffer.subarray(0, eol).toString("latin1"))) throw new MultipartError(400, "multipart delimiter is followed by junk");
          current?.end();
          current = undefined;
          buffer = buffer.subarray(eol + 2);
          state = "headers";
          return true;
        }
        case "headers": {
          // A part with no headers starts with CRLF straight away.
          const end = buffer.subarray(0, 2).equals(CRLF) ? -2 : buffer.indexOf(HEADER_END);
          if (end === -1) {
            if (buffer.length > maxHeaderBytes) throw new MultipartError(413, `multipart part headers exceed ${maxHeaderBytes} bytes`);
            return false;
          }
          const block = end === -2 ? "" : buffer.subarray(0, end).toString("utf8");
          if (block.length > maxHeaderBytes) throw new MultipartError(413, `multipart part headers exceed ${maxHeaderBytes} bytes`);
          buffer = buffer.subarray(end === -2 ? 2 : end + 4);
          parts++;
          if (parts > maxParts) throw new MultipartError(413, `multipart body has more than ${maxParts} parts`);
          const part = makePart(block);
          current = part.body as PassThrough;
          partBytes = 0;
          state = "body";
          await new Promise<void>((taken) => offer({ part, taken }));
          return true;
        }
        case "body": {
          const at = buffer.indexOf(delimiter);
          if (at >= 0) {
            await emit(buffer.subarray(0, at));
            buffer = buffer.subarray(at + delimiter.length);
            state = "after-delimiter";
            return true;
          }
          // Keep a tail that could be the start of a delimiter split across chunks.
          const safe = buffer.length - (delimiter.length - 1);
          if (safe > 0) {
            await emit(buffer.subarray(0, safe));
            buffer = buffer.subarray(safe);
          }
          return false;
        }
        case "epilogue":
          buffer = Buffer.alloc(0);
          return false;
      }
    };

    for await (const chunk of source) {
      if (stopped) return;
      const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      total += data.length;
      if (total > maxTotalBytes) throw new MultipartError(413, `multipart body exceeds the ${maxTotalBytes}-byte limit`);
      buffer = buffer.length === 0 ? data : Buffer.concat([buffer, data]);
      while (await step()) if (stopped) return;
    }
    if ((state as string) !== "epilogue") throw new MultipartError(400, "multipart body ended before its closing delimiter");
  };

  void drive().then(
    () => offer({ done: true }),
    (error: Error) => {
      current?.destroy(error);
      offer({ error });
    },
  );

  let previous: MultipartPart | undefined;
  try {
    for (;;) {
      if (previous && !previous.body.readableEnded) previous.body.resume(); // discard what was not read
      const slot = await next();
      if ("done" in slot) return;
      if ("error" in slot) throw slot.error;
      previous = slot.part;
      slot.taken();
      yield slot.part;
    }
  } finally {
    stopped = true;
    if (previous && !previous.body.readableEnded) previous.body.resume();
  }
}

function makePart(block: string): MultipartPart {
  const headers: Record<string, string> = {};
  for (const line of block.split("\r\n")) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new MultipartError(400, `multipart part header is malformed: ${JSON.stringify(line.slice(0, 80))}`);
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const disposition = parseHeaderParams(headers["content-disposition"] ?? "");
  const body = new PassThrough();
  const bytes = async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  return {
    name: disposition.params.name ?? "",
    filename: disposition.params.filename,
    contentType: headers["content-type"] ?? "text/plain",
    headers,
    body,
    bytes,
    text: async () => (await bytes()).toString("utf8"),
  };
}

export interface BufferedPart {
  name: string;
  filename: string | undefined;
  contentType: string;
  headers: Record<string, string>;
  data: Buffer;
}

/** Reads every part into memory (still bounded by `limits`). */
export async function readMultipart(source: AsyncIterable<Buffer | string>, boundary: string, limits?: MultipartLimits): Promise<BufferedPart[]> {
  const parts: BufferedPart[] = [];
  for await (const part of parseMultipart(source, boundary, limits)) {
    parts.push({ name: part.name, filename: part.filename, contentType: part.contentType, headers: { ...part.headers }, data: await part.bytes() });
  }
  return parts;
}

/** Waits for `drain` or `close`, removing the listener that did not fire (backpressure repeats per chunk). */
async function drainOrClose(stream: PassThrough): Promise<void> {
  const stop = new AbortController();
  const quietly = (event: string) =>
    once(stream, event, { signal: stop.signal }).then(
      () => undefined,
      () => undefined,
    );
  try {
    await Promise.race([quietly("drain"), quietly("close")]);
  } finally {
    stop.abort();
  }
}
