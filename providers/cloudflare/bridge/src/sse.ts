/**
 * The bridge's SSE answer to a streamed exec: `event: <type>` + one `data:` JSON line per frame,
 * and a `: keepalive` comment every interval from the stream's start, so a silent command's
 * connection is not dropped by the edge. The stream closes after `complete` or `error`.
 */
export interface SseChannel {
  response: Response;
  send(event: string, data: unknown): Promise<void>;
  /** Called once when a write fails: the client went away. */
  onBroken(listener: () => void): void;
  close(): Promise<void>;
}

export function openSse(keepaliveMs: number): SseChannel {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let closed = false;
  let broken = false;
  const listeners: Array<() => void> = [];
  // A client that went away makes writes fail: told to whoever listens (a streamed process is then
  // ended); upstream's text stream runs its command to the end regardless.
  const write = (text: string) =>
    closed || broken
      ? Promise.resolve()
      : writer.write(encoder.encode(text)).catch(() => {
          if (broken) return;
          broken = true;
          for (const listener of listeners.splice(0)) listener();
        });
  const keepalive = setInterval(() => void write(": keepalive\n\n"), keepaliveMs);
  return {
    response: new Response(readable, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } }),
    send: (event, data) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    onBroken: (listener) => void (broken ? listener() : listeners.push(listener)),
    async close() {
      if (closed) return;
      clearInterval(keepalive);
      closed = true;
      await writer.close().catch(() => undefined);
    },
  };
}
