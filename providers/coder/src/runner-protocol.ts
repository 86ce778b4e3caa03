/**
 * The runner app's wire contract as the plugin speaks it (the runner's own copy is
 * runner/src/stream-protocol.ts; the tests run the real runner against this one).
 */
import { STREAM_TRANSPORT, type TransportCapabilities } from "@paperclip-sandbox/kit";

/** What the stream route can do (the runner ends the whole group and enforces the deadline). */
export const STREAM_CAPABILITIES: TransportCapabilities = Object.freeze({ ...STREAM_TRANSPORT, remoteTimeout: true });

const HEALTH_PROTOCOL = "paperclip-runner/1";
const STREAM_PROTOCOL = "paperclip-runner.stream.v1";

export const MSG_START = 0x01;
export const MSG_STDIN = 0x02;
export const MSG_STDIN_END = 0x03;
export const MSG_SIGNAL = 0x04;
export const MSG_STARTED = 0x11;
export const MSG_STDOUT = 0x12;
export const MSG_STDERR = 0x13;
export const MSG_EXIT = 0x14;
export const MSG_ERROR = 0x15;

/** Stdin goes out in messages of at most this (the runner accepts up to 1 MiB). */
export const MAX_STDIN_MESSAGE = 512 * 1024;

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

export function frame(type: number, payload?: Buffer | object): Buffer {
  const body = payload === undefined ? Buffer.alloc(0) : Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload), "utf8");
  return Buffer.concat([Buffer.of(type), body]);
}
