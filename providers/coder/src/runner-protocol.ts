/**
 * The runner app's wire contract as the plugin speaks it: the constants are the runner's own
 * (runner/src/stream-protocol.ts, built into this package's dist/runner/), so the two cannot drift.
 */
import { STREAM_TRANSPORT, type TransportCapabilities } from "@paperclip-sandbox/kit";
import { HEALTH_PROTOCOL, MAX_MESSAGE_BYTES, message, STREAM_PROTOCOL } from "@paperclip-sandbox/plugin-coder/runner/protocol";

/** What the stream route can do (the runner ends the whole group and enforces the deadline). */
export const STREAM_CAPABILITIES: TransportCapabilities = Object.freeze({ ...STREAM_TRANSPORT, remoteTimeout: true });

export { MSG_ERROR, MSG_EXIT, MSG_SIGNAL, MSG_START, MSG_STARTED, MSG_STDERR, MSG_STDIN, MSG_STDIN_END, MSG_STDOUT } from "@paperclip-sandbox/plugin-coder/runner/protocol";

/** Stdin goes out in messages of half what the runner accepts. */
export const MAX_STDIN_MESSAGE = MAX_MESSAGE_BYTES / 2;

/** What `GET /healthz` says about the runner; absent fields mean a runner of the seed's contract only. */
export interface RunnerHealth {
  stream: boolean;
  base64: boolean;
}

export function parseHealth(body: unknown): RunnerHealth {
  if (!body || typeof body !== "object") return { stream: false, base64: false };
  const health = body as { protocol?: unknown; stream?: unknown; encodings?: unknown };
  const ours = health.protocol === HEALTH_PROTOCOL;
  return {
    stream: ours && health.stream === STREAM_PROTOCOL,
    base64: ours && Array.isArray(health.encodings) && health.encodings.includes("base64"),
  };
}

/** One message: its type byte, then raw bytes or JSON. */
export const frame = message;
