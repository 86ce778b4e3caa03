/**
 * The runner's stream route (`GET /stream`, a WebSocket): one command per connection, every message
 * binary, its first byte the type. Binary-safe both ways, output live, stdin with EOF, and the whole
 * process group ended by a signal message or by the connection going away.
 *
 *   client → runner  START {script, env, envMode:"replace", cwd?, timeoutMs?, stdin:boolean} (JSON)
 *                    STDIN <bytes> · STDIN_END · SIGNAL {graceMs?} (JSON): SIGTERM the group, SIGKILL after graceMs
 *   runner → client  STARTED {pid} · STDOUT <bytes> · STDERR <bytes> · EXIT {exitCode, signal, timedOut}
 *                    ERROR {error, message} (a refused start); then the runner closes (1000)
 */
/** What `GET /healthz` names as its protocol, and its stream route. */
export const HEALTH_PROTOCOL = "paperclip-runner/1";
export const STREAM_PROTOCOL = "paperclip-runner.stream.v1";

export const MSG_START = 0x01;
export const MSG_STDIN = 0x02;
export const MSG_STDIN_END = 0x03;
export const MSG_SIGNAL = 0x04;

export const MSG_STARTED = 0x11;
export const MSG_STDOUT = 0x12;
export const MSG_STDERR = 0x13;
export const MSG_EXIT = 0x14;
export const MSG_ERROR = 0x15;

/** Largest message either side sends (stdin and output go in pieces of at most this). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** Output is forwarded in pieces of at most this many bytes. */
export const OUTPUT_PIECE_BYTES = 256 * 1024;

export function message(type: number, payload?: Buffer | object): Buffer {
  const body = payload === undefined ? Buffer.alloc(0) : Buffer.isBuffer(payload) ? payload : Buffer.from(JSON.stringify(payload), "utf8");
  return Buffer.concat([Buffer.of(type), body]);
}
