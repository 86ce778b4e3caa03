/**
 * Reading an exec run's output rings: one-shot reads from an offset (`read`), and live
 * subscriptions that deliver from an offset and follow (`subscribe`). A subscription is a cursor
 * over the ring: it writes while the connection accepts bytes and waits for `drain` otherwise, so
 * a slow reader costs one socket buffer, never an unbounded queue; if the ring overtakes it, it is
 * told the range it lost (`gap`) and continues from the oldest kept byte.
 *   subscription messages: subscribed {pid}, STDOUT/STDERR frames, gap {stream, from, to},
 *   eof {stream, offset} after a stream's last byte, exit {...} once every requested stream has
 *   ended and the run has finished; then the connection ends.
 */
import type net from "node:net";
import { FRAME_STDERR, FRAME_STDOUT, writeControl, writeFrame } from "./frames.mjs";
import { OpError, type Conversation } from "./conversation.mjs";
import { exitMessage } from "./exec-conversations.mjs";
import type { ExecRun, StreamName } from "./exec-runs.mjs";

const CHUNK_BYTES = 256 * 1024;
const MAX_READ_BYTES = 16 * 1024 * 1024;
const FRAME_OF: Record<StreamName, number> = { stdout: FRAME_STDOUT, stderr: FRAME_STDERR };

function parseStream(value: unknown): StreamName {
  if (value === "stdout" || value === "stderr") return value;
  throw new OpError("EINVAL", "stream must be stdout or stderr");
}

function parseOffset(value: unknown, name: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new OpError("EINVAL", `${name} must be a non-negative integer`);
  return value;
}

/** Sends up to `maxBytes` from `offset` as data frames, then `read-done`, and ends the connection. */
export function readOutput(sock: net.Socket, run: ExecRun, message: Record<string, unknown>): void {
  const stream = parseStream(message.stream);
  const offset = parseOffset(message.offset, "offset");
  const maxBytes = message.maxBytes === undefined ? MAX_READ_BYTES : parseOffset(message.maxBytes, "maxBytes");
  const ring = run.output[stream];
  const { start, data } = ring.read(offset, Math.min(maxBytes, MAX_READ_BYTES));
  for (let at = 0; at < data.length; at += CHUNK_BYTES) writeFrame(sock, FRAME_OF[stream], data.subarray(at, at + CHUNK_BYTES));
  const nextOffset = start + data.length;
  writeControl(sock, { op: "read-done", stream, start, nextOffset, ended: ring.ended && nextOffset >= ring.end, dropped: Math.max(0, start - offset) });
  sock.end();
}

export function subscribe(sock: net.Socket, run: ExecRun, message: Record<string, unknown>): Conversation {
  const from = (message.from ?? {}) as Record<string, unknown>;
  const cursors = new Map<StreamName, { offset: number; eofSent: boolean }>();
  for (const stream of ["stdout", "stderr"] as const) {
    if (from[stream] !== undefined && from[stream] !== null) cursors.set(stream, { offset: parseOffset(from[stream], `from.${stream}`), eofSent: false });
  }
  if (cursors.size === 0) throw new OpError("EINVAL", "subscribe needs from.stdout and/or from.stderr");
  let waitingForDrain = false;
  let finished = false;

  const pump = () => {
    if (waitingForDrain || finished || sock.destroyed) return;
    for (const [stream, cursor] of cursors) {
      const ring = run.output[stream];
      while (cursor.offset < ring.end) {
        const { start, data } = ring.read(cursor.offset, CHUNK_BYTES);
        if (start > cursor.offset) writeControl(sock, { op: "gap", stream, from: cursor.offset, to: start });
        cursor.offset = start + data.length;
        if (data.length === 0) break;
        if (!writeFrame(sock, FRAME_OF[stream], data)) {
          waitingForDrain = true;
          sock.once("drain", () => {
            waitingForDrain = false;
            pump();
          });
          return;
        }
      }
      if (ring.ended && !cursor.eofSent && cursor.offset >= ring.end) {
        cursor.eofSent = true;
        writeControl(sock, { op: "eof", stream, offset: cursor.offset });
      }
    }
    if (run.exit && [...cursors.values()].every((cursor) => cursor.eofSent)) {
      finished = true;
      run.listeners.delete(pump);
      writeControl(sock, exitMessage(run));
      sock.end();
    }
  };

  run.listeners.add(pump);
  writeControl(sock, { op: "subscribed", pid: run.pid });
  pump();
  return {
    onFrame: () => undefined,
    onClose: () => {
      finished = true;
      run.listeners.delete(pump);
    },
  };
}
