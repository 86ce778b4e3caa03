import type { HttpContext } from "./context.js";
import { flushHeaders, writeChunk } from "./types.js";

export interface SseEvent {
  /** `event:` field; omitted means the client's default `message`. */
  event?: string;
  /** Data; a non-string is sent as JSON. Newlines become several `data:` lines. */
  data: unknown;
  id?: string;
  /** Reconnection delay hint, ms. */
  retry?: number;
}

export interface SseOptions {
  /** Comment sent every this many ms from the start (default 15,000; 0 turns it off). */
  keepaliveMs?: number;
  /** The keepalive comment's text (default `keepalive`, sent as `: keepalive`). */
  keepaliveComment?: string;
  status?: number;
  headers?: Record<string, string>;
}

export interface SseWriter {
  send(event: SseEvent): void;
  comment(text: string): void;
  /** Ends the stream properly. */
  close(): void;
  /** True once closed, dropped by a fault, or the client left. */
  readonly closed: boolean;
}

/**
 * Opens a `text/event-stream` response. Events count as messages in the record; the drop-stream
 * fault cuts the connection after its number of events.
 */
export function openSse(ctx: HttpContext, options: SseOptions = {}): SseWriter {
  const { res } = ctx;
  const drop = ctx.takeFault("drop-stream");
  res.writeHead(options.status ?? 200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    ...(ctx.httpVersion === "1.1" ? { connection: "keep-alive" } : {}),
    ...options.headers,
  });
  flushHeaders(res);
  let closed = false;
  let sent = 0;
  const keepaliveMs = options.keepaliveMs ?? 15_000;
  const keepalive = keepaliveMs > 0 ? setInterval(() => writer.comment(options.keepaliveComment ?? "keepalive"), keepaliveMs) : undefined;
  const stop = () => {
    closed = true;
    if (keepalive) clearInterval(keepalive);
  };
  res.once("close", stop);
  ctx.signal.addEventListener("abort", stop, { once: true });

  const write = (text: string) => {
    if (!closed) writeChunk(res, text);
  };

  const writer: SseWriter = {
    send(event) {
      if (closed) return;
      const data = typeof event.data === "string" ? event.data : JSON.stringify(event.data);
      let frame = "";
      if (event.event !== undefined) frame += `event: ${singleLine(event.event)}\n`;
      if (event.id !== undefined) frame += `id: ${singleLine(event.id)}\n`;
      if (event.retry !== undefined) frame += `retry: ${Math.trunc(event.retry)}\n`;
      for (const line of data.split(/\r\n|\r|\n/)) frame += `data: ${line}\n`;
      ctx.record.messageOut(0); // its bytes are counted by the response tap
      sent++;
      if (drop && sent >= (drop.afterMessages ?? 1)) {
        stop();
        // Cut once the event has reached the socket, so exactly `afterMessages` events arrive.
        writeChunk(res, frame + "\n", () => ctx.cut());
        return;
      }
      write(frame + "\n");
    },
    comment(text) {
      write(`: ${singleLine(text)}\n\n`);
    },
    close() {
      if (closed) return;
      stop();
      res.end();
    },
    get closed() {
      return closed;
    },
  };
  if (drop && (drop.afterMessages ?? 1) === 0) {
    stop();
    ctx.cut();
  }
  return writer;
}

const singleLine = (text: string) => text.replace(/[\r\n]+/g, " ");
