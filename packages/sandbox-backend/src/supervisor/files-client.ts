/**
 * Host side of the in-jail file ops (see in-jail/confinement.mts for what they enforce). Every op
 * is one connection; contents stream with backpressure both ways.
 */
import { Readable } from "node:stream";
import { SandboxFileError } from "../errors.js";
import type { FileInfo, FileScope, SandboxFiles } from "../types.js";
import { Connection, LARGE_REPLY_LIMITS, replyError, reportViolation, SupervisorTransportError, type ControlMessage, type SupervisorChannel } from "./connection.js";
import { FRAME_STDOUT } from "./protocol.js";

const DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024;

function fileError(message: ControlMessage, path: string): SandboxFileError {
  const error = replyError(message);
  return new SandboxFileError(error.code, error.message, path);
}

function scope(options: FileScope | undefined): Record<string, unknown> {
  return options?.roots === undefined ? {} : { roots: options.roots };
}

/** File info from a reply; a reply without one breaks the protocol. */
function fileInfoFrom(channel: SupervisorChannel, value: unknown): FileInfo {
  if (typeof value !== "object" || value === null) throw reportViolation(channel, "the supervisor sent no file info");
  const entry = value as Record<string, unknown>;
  const type = entry.type === "file" || entry.type === "directory" || entry.type === "symlink" ? entry.type : "other";
  return {
    name: String(entry.name ?? ""),
    path: String(entry.path ?? ""),
    type,
    size: Number(entry.size ?? 0),
    mode: Number(entry.mode ?? 0),
    uid: Number(entry.uid ?? -1),
    gid: Number(entry.gid ?? -1),
    owner: String(entry.owner ?? ""),
    group: String(entry.group ?? ""),
    mtimeMs: Number(entry.mtimeMs ?? 0),
    ...(typeof entry.symlinkTarget === "string" ? { symlinkTarget: entry.symlinkTarget } : {}),
  };
}

/** One fs request answered by `fs-done {result}`. */
function fileRequest(channel: SupervisorChannel, message: Record<string, unknown>, path: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const connection = new Connection(
      channel,
      {
        onControl(reply) {
          if (answered) {
            connection.violate("a second reply to a file op");
            return;
          }
          answered = true;
          if (reply.op === "fs-done") resolve(reply.result);
          else if (reply.op === "error") reject(fileError(reply, path));
          else reject(connection.violate(`unexpected reply ${JSON.stringify(reply.op.slice(0, 32))} to a file op`));
          connection.end();
        },
        onData() {
          connection.violate(`data frames in reply to a file ${String(message.action)}`);
        },
        onEnd(error) {
          if (!answered) reject(error ?? new SupervisorTransportError("supervisor closed the connection during a file op"));
        },
      },
      message.action === "list" ? LARGE_REPLY_LIMITS : undefined,
    );
    connection.send({ op: "fs", ...message });
  });
}

/**
 * A file's bytes as a Readable; the connection pauses while the consumer does. `limit` bounds what
 * is accepted (a read into memory).
 */
function openRead(channel: SupervisorChannel, path: string, options: FileScope & { offset?: number; length?: number }, limit: number | null): Promise<Readable> {
  return new Promise((resolve, reject) => {
    let started = false;
    let received = 0;
    let connection: Connection;
    const stream = new Readable({
      read: () => connection.resume(),
      destroy: (error, callback) => {
        connection.close();
        callback(error);
      },
    });
    let finished = false;
    connection = new Connection(channel, {
      onData(type, payload) {
        if (type !== FRAME_STDOUT) {
          connection.violate("stderr frames in a file read");
          return;
        }
        if (finished) {
          connection.violate("file data after the read was done");
          return;
        }
        received += payload.length;
        if (limit !== null && received > limit) {
          connection.fail(new SandboxFileError("EFBIG", `${path} is larger than ${limit} bytes (use readStream, or raise maxBytes)`, path));
          return;
        }
        if (!started) {
          started = true;
          resolve(stream);
        }
        if (!stream.push(payload)) connection.pause();
      },
      onControl(message) {
        if (finished) return;
        finished = true;
        if (message.op === "fs-done") {
          if (!started) {
            started = true;
            resolve(stream);
          }
          stream.push(null);
        } else {
          const error = message.op === "error" ? fileError(message, path) : connection.violate(`unexpected reply ${JSON.stringify(message.op.slice(0, 32))} to a read`);
          if (started) stream.destroy(error);
          else reject(error);
        }
        connection.end();
      },
      onEnd(error) {
        if (finished && !error) return;
        const lost = error ?? new SupervisorTransportError(`the read of ${path} ended early`);
        if (started) stream.destroy(lost);
        else reject(lost);
      },
    });
    connection.send({
      op: "fs",
      action: "read",
      path,
      ...scope(options),
      ...(options.offset === undefined ? {} : { offset: options.offset }),
      ...(options.length === undefined ? {} : { length: options.length }),
    });
  });
}

async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

function write(channel: SupervisorChannel, path: string, data: Buffer | string | Readable, options: FileScope & { mode?: number; createParents?: boolean }): Promise<FileInfo> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const connection = new Connection(channel, {
      onControl(reply) {
        if (answered) return;
        answered = true;
        try {
          if (reply.op === "fs-done") resolve(fileInfoFrom(channel, reply.result));
          else if (reply.op === "error") reject(fileError(reply, path));
          else reject(connection.violate(`unexpected reply ${JSON.stringify(reply.op.slice(0, 32))} to a write`));
        } catch (error) {
          reject(error as Error);
        }
        // Closed, not ended: an early refusal must also stop the upload still being sent.
        connection.close();
      },
      onEnd(error) {
        if (!answered) reject(error ?? new SupervisorTransportError(`the write of ${path} ended before it was confirmed`));
      },
    });
    connection.send({
      op: "fs",
      action: "write",
      path,
      ...scope(options),
      ...(options.mode === undefined ? {} : { mode: options.mode }),
      ...(options.createParents === undefined ? {} : { createParents: options.createParents }),
    });
    void (async () => {
      try {
        if (typeof data === "string" || Buffer.isBuffer(data)) await connection.sendData(typeof data === "string" ? Buffer.from(data, "utf8") : data);
        else for await (const chunk of data) await connection.sendData(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
        connection.send({ op: "stdin-end" });
      } catch (error) {
        // The supervisor refused early (its reply says why), or the source failed: end the upload.
        if (!answered) {
          answered = true;
          reject(error as Error);
        }
        connection.close();
      }
    })();
  });
}

export function createFilesClient(channel: SupervisorChannel, guard: () => void | Promise<void>): SandboxFiles {
  return {
    async read(path, options = {}) {
      await guard();
      return collect(await openRead(channel, path, options, options.maxBytes ?? DEFAULT_MAX_READ_BYTES));
    },
    async readStream(path, options = {}) {
      await guard();
      return openRead(channel, path, options, null);
    },
    async write(path, data, options = {}) {
      await guard();
      return write(channel, path, data, options);
    },
    async stat(path, options = {}) {
      await guard();
      return fileInfoFrom(channel, await fileRequest(channel, { action: "stat", path, follow: options.follow === true, ...scope(options) }, path));
    },
    async list(path, options = {}) {
      await guard();
      const result = await fileRequest(
        channel,
        { action: "list", path, ...scope(options), ...(options.depth === undefined ? {} : { depth: options.depth }), ...(options.maxEntries === undefined ? {} : { maxEntries: options.maxEntries }) },
        path,
      );
      if (!Array.isArray(result)) throw reportViolation(channel, "the supervisor's listing is not a list");
      return result.map((entry) => fileInfoFrom(channel, entry));
    },
    async mkdir(path, options = {}) {
      await guard();
      const result = (await fileRequest(
        channel,
        { action: "mkdir", path, parents: options.parents === true, ...scope(options), ...(options.mode === undefined ? {} : { mode: options.mode }) },
        path,
      )) as { created?: unknown } | null;
      return { created: result?.created === true };
    },
    async remove(path, options = {}) {
      await guard();
      await fileRequest(channel, { action: "remove", path, recursive: options.recursive === true, ...scope(options) }, path);
    },
    async move(from, to, options = {}) {
      await guard();
      return fileInfoFrom(channel, await fileRequest(channel, { action: "move", from, to, overwrite: options.overwrite === true, ...scope(options) }, from));
    },
  };
}
