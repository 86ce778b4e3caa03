/**
 * File contents in and out (`fs` with op read or write), streamed over the connection with
 * backpressure both ways.
 *   read:  request -> data frames (STDOUT) -> fs-done {size}
 *   write: request, STDIN frames, stdin-end -> fs-done {result: FileInfo}
 * A write goes to a fresh temporary file in the verified parent directory (O_EXCL|O_NOFOLLOW) and
 * is renamed over the name at the end: a link at the name is replaced, never followed, and readers
 * never see a half-written file.
 */
import type net from "node:net";
import fsp from "node:fs/promises";
import { constants } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { FRAME_CONTROL, FRAME_STDIN, FRAME_STDOUT, parseControl, writeControl, writeFrame } from "./frames.mjs";
import { OpError, replyError, type Conversation } from "./conversation.mjs";
import { Confinement, makeDirectories, normalizePath, openParent, realPathOf } from "./confinement.mjs";
import { fileInfo } from "./file-info.mjs";

const CHUNK_BYTES = 256 * 1024;
/** Bytes queued for the file before the connection is paused. */
const QUEUE_HIGH_WATER = 1024 * 1024;

function rangeOption(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) throw new OpError("EINVAL", `${name} must be a non-negative integer`);
  return value;
}

/** Streams a regular file (or a range of it) to the connection. */
export async function sendFile(sock: net.Socket, message: Record<string, unknown>, confinement: Confinement): Promise<void> {
  const target = normalizePath(message.path);
  const offset = rangeOption(message.offset, "offset") ?? 0;
  const length = rangeOption(message.length, "length");
  // O_NONBLOCK: opening a FIFO must not hang the supervisor (it is refused just below).
  const handle = await fsp.open(target, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    confinement.check(await realPathOf(handle), target);
    const stat = await handle.stat();
    if (stat.isDirectory()) throw new OpError("EISDIR", `${target} is a directory`);
    if (!stat.isFile()) throw new OpError("EINVAL", `${target} is not a regular file`);
    let position = offset;
    let sent = 0;
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    for (;;) {
      const want = length === undefined ? CHUNK_BYTES : Math.min(CHUNK_BYTES, length - sent);
      if (want <= 0) break;
      const { bytesRead } = await handle.read(buffer, 0, want, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      sent += bytesRead;
      if (sock.destroyed) return;
      // Copied: the buffer is reused for the next read while the socket may still hold this one.
      if (!writeFrame(sock, FRAME_STDOUT, Buffer.from(buffer.subarray(0, bytesRead)))) {
        await new Promise<void>((resolve) => {
          const done = () => {
            sock.off("drain", done);
            sock.off("close", done);
            resolve();
          };
          sock.once("drain", done);
          sock.once("close", done);
        });
      }
    }
    writeControl(sock, { op: "fs-done", result: { size: sent } });
    sock.end();
  } finally {
    await handle.close();
  }
}

/** Receives a file's bytes from the connection and puts them in place on `stdin-end`. */
export function receiveFile(sock: net.Socket, message: Record<string, unknown>, confinementReady: Promise<Confinement>, describeError: (error: unknown) => unknown = (error) => error): Conversation {
  const queue: Buffer[] = [];
  let queued = 0;
  let ended = false;
  let closed = false;
  let failed = false;
  let wake: (() => void) | null = null;
  const signal = () => {
    const resume = wake;
    wake = null;
    resume?.();
  };
  const nextChunk = async (): Promise<Buffer | null> => {
    for (;;) {
      const chunk = queue.shift();
      if (chunk) {
        queued -= chunk.length;
        if (queued < QUEUE_HIGH_WATER && sock.isPaused()) sock.resume();
        return chunk;
      }
      if (ended) return null;
      if (closed) throw new OpError("ECONNRESET", "the connection ended before the file was complete");
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };

  void (async () => {
    let temp: string | null = null;
    let parent: Awaited<ReturnType<typeof openParent>> | null = null;
    try {
      const confinement = await confinementReady;
      const target = normalizePath(message.path);
      if (message.createParents !== false) await makeDirectories(path.posix.dirname(target), confinement, 0o755);
      parent = await openParent(target, confinement);
      const existing = await fsp.lstat(parent.at()).catch(() => null);
      if (existing?.isDirectory()) throw new OpError("EISDIR", `${target} is a directory`);
      const modeValue = message.mode;
      if (modeValue !== undefined && (typeof modeValue !== "number" || !Number.isInteger(modeValue) || modeValue < 0 || modeValue > 0o7777)) {
        throw new OpError("EINVAL", "mode must be an integer in [0, 0o7777]");
      }
      const mode = typeof modeValue === "number" ? modeValue : existing?.isFile() ? existing.mode & 0o7777 : 0o644;
      const tempName = `.${parent.name.slice(0, 120)}.${randomBytes(6).toString("hex")}.paperclip-tmp`;
      temp = parent.at(tempName);
      const file = await fsp.open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        await file.chmod(mode);
        for (let chunk = await nextChunk(); chunk; chunk = await nextChunk()) await file.write(chunk);
      } finally {
        await file.close();
      }
      await fsp.rename(temp, parent.at());
      temp = null;
      const written = await fsp.lstat(parent.at());
      writeControl(sock, { op: "fs-done", result: fileInfo(parent.name, target, written) });
      sock.end();
    } catch (error) {
      // Whatever is still sent is not wanted any more: drop it rather than queue it.
      failed = true;
      queue.length = 0;
      sock.resume();
      if (!sock.destroyed) replyError(sock, describeError(error));
    } finally {
      if (temp) await fsp.unlink(temp).catch(() => undefined);
      await parent?.close();
    }
  })();

  return {
    onFrame(type, payload) {
      if (type === FRAME_STDIN) {
        if (ended || failed || payload.length === 0) return;
        queue.push(payload);
        queued += payload.length;
        // Bounded: stop reading the connection until the file has taken what is queued.
        if (queued >= QUEUE_HIGH_WATER) sock.pause();
        signal();
      } else if (type === FRAME_CONTROL && parseControl(payload).op === "stdin-end") {
        ended = true;
        signal();
      }
    },
    onClose() {
      closed = true;
      signal();
    },
  };
}
