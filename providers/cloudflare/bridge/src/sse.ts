/**
 * The bridge's SSE answer to a streamed exec: `event: <type>` + one `data:` JSON line per frame,
 * and a `: keepalive` comment from the start every interval so a silent command's connection is not
 * dropped by the edge. The stream closes after `complete` or `error`.
 */
export interface SseChannel {
  response: Response;
  send(event: "stdout" | "stderr" | "complete" | "error", data: unknown): Promise<void>;
  close(): Promise<void>;
}

export function openSse(keepaliveMs: number): SseChannel {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let closed = false;
  // A client that went away makes writes fail; the command still runs to its end.
  const write = (text: string) => (closed ? Promise.resolve() : writer.write(encoder.encode(text)).catch(() => undefined));
  const timer = setInterval(() => void write(": keepalive\n\n"), keepaliveMs);
  return {
    response: new Response(readable, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } }),
    send: (event, data) => write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`),
    async close() {
      if (closed) return;
      clearInterval(timer);
      closed = true;
      await writer.close().catch(() => undefined);
    },
  };
}
