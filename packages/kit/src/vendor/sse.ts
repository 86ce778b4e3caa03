import { ProviderApiError } from "./api-error.js";

/** One server-sent event (`text/event-stream`), as the WHATWG parser dispatches it. */
export interface ServerSentEvent {
  /** `message` when the server named none. */
  event: string;
  /** The `data:` lines, joined with newlines. */
  data: string;
  /** The last `id:` seen (it carries over to later events). */
  id: string | undefined;
  /** A `retry:` the server asked for (ms), when this event carried one. */
  retryMs?: number;
}

/** Largest event kept in memory; a longer one is an error (`response_too_large`). */
const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;

/**
 * Reads a `text/event-stream` body event by event (lines ended by LF, CRLF or CR; `:` comments
 * ignored; an event without data is not dispatched). Ends with the body; cancelling the loop
 * cancels the body.
 */
export async function* readEventStream(body: ReadableStream<Uint8Array>, options: { vendor?: string; operation?: string; maxEventBytes?: number } = {}): AsyncGenerator<ServerSentEvent> {
  const maxBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let data: string[] = [];
  let dataBytes = 0;
  let event = "";
  let id: string | undefined;
  let retryMs: number | undefined;
  let first = true;
  const takeLine = (line: string): ServerSentEvent | undefined => {
    if (line === "") {
      const dispatched = data.length > 0 ? { event: event || "message", data: data.join("\n"), id, ...(retryMs !== undefined ? { retryMs } : {}) } : undefined;
      data = [];
      dataBytes = 0;
      event = "";
      retryMs = undefined;
      return dispatched;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      dataBytes += value.length + 1;
      if (dataBytes > maxBytes) {
        throw new ProviderApiError({
          vendor: options.vendor ?? "vendor",
          operation: options.operation ?? "events",
          status: 200,
          code: "response_too_large",
          detail: `an event of the stream is larger than ${maxBytes} bytes`,
          retryable: false,
          gone: false,
          mayHaveTakenEffect: true,
        });
      }
      data.push(value);
    } else if (field === "event") event = value;
    else if (field === "id" && !value.includes("\u0000")) id = value;
    else if (field === "retry" && /^\d+$/.test(value)) retryMs = Number(value);
    return undefined;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      if (first && buffer.length > 0) {
        if (buffer.charCodeAt(0) === 0xfeff) buffer = buffer.slice(1);
        first = false;
      }
      for (;;) {
        const end = buffer.search(/\r\n|\r|\n/);
        // A lone CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (end === -1 || (!done && end === buffer.length - 1 && buffer[end] === "\r")) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        const dispatched = takeLine(line);
        if (dispatched) yield dispatched;
      }
      if (buffer.length > maxBytes) takeLine(`data:${buffer}`);
      if (done) return;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
