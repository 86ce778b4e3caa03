/**
 * The bridge's SSE answer to a streamed exec: `event: <type>` + one `data:` JSON line per frame,
 * and a `: keepalive` comment from the start every interval so a silent command's connection is not
 * dropped by the edge. The stream closes after `complete` or `error`.
 */
export interface SseChannel {
  response: Response;
  send(event: "stdout" | "stderr" | "complete" | "error", data: unknown): Promise<void>;
  /** Starts the keepalive comments (call from the task that runs the command). */
  keepalive(): void;
  close(): Promise<void>;
}

export function openSse(keepaliveMs: number): SseChannel {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let closed = false;
  // A client that went away makes writes fail; the command still runs to its end.
  const write = (text: string) => (closed ? Promise.resolve() : writer.write(encoder.encode(text)).catch(() => undefined));
  // A chain of timeouts armed from the task that runs the command (an interval armed before the
  // response is returned never fired in workerd while the Durable Object call was pending).
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = () => {
    timer = setTimeout(() => {
      if (closed) return;
      void write(": keepalive\n\n");
      tick();
    }, keepaliveMs);
  };
  return {
    response: new Response(readable, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } }),
    send: (event, data) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    keepalive: () => {
      if (timer === undefined) tick();
    },
    async close() {
      if (closed) return;
      clearTimeout(timer);
      closed = true;
      await writer.close().catch(() => undefined);
    },
  };
}
