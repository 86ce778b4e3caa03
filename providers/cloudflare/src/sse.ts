/** One server-sent event: its `event:` name (default `message`) and its `data:` lines joined. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * The events of an SSE body, in order (CRLF or LF line ends; comments such as `: keepalive` and
 * fields other than `event`/`data` are skipped). A broken body rejects the iteration; leaving it
 * early cancels the body.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "message";
  let data: string[] = [];
  let hasData = false;
  const reader = body.getReader();
  let ended = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let at: number;
      while ((at = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, at).replace(/\r$/, "");
        buffer = buffer.slice(at + 1);
        if (line === "") {
          if (hasData) yield { event, data: data.join("\n") };
          event = "message";
          data = [];
          hasData = false;
        } else if (line.startsWith(":")) {
          continue;
        } else {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event = value;
          else if (field === "data") {
            data.push(value);
            hasData = true;
          }
        }
      }
      if (done) {
        ended = true;
        return;
      }
    }
  } finally {
    // A reader that stopped early (or a broken body) lets the connection go.
    if (!ended) await reader.cancel().catch(() => undefined);
  }
}
