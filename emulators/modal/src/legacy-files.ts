import { randomUUID } from "node:crypto";
import { GrpcError, GrpcStatus, type GrpcCall, type GrpcHandler } from "@paperclip-sandbox/emulator-kit";
import type { SandboxFiles } from "@paperclip-sandbox/sandbox-backend";
import type { SandboxManager, SandboxRecord } from "./sandboxes.js";

/** Largest file an open handle holds (the container runtime streams; the emulator buffers). */
const MAX_OPEN_FILE_BYTES = 64 * 1024 * 1024;
/** Finished execs whose output can still be fetched (the SDK fetches right away; retries re-fetch). */
const KEPT_RESULTS = 1024;

/** errno numbers and their strerror text, as the runtime reports a failed file call. */
const ERRNO: Record<string, [number, string]> = {
  ENOENT: [2, "No such file or directory"],
  EBADF: [9, "Bad file descriptor"],
  EACCES: [13, "Permission denied"],
  EPERM: [1, "Operation not permitted"],
  EEXIST: [17, "File exists"],
  ENOTDIR: [20, "Not a directory"],
  EISDIR: [21, "Is a directory"],
  EINVAL: [22, "Invalid argument"],
  EFBIG: [27, "File too large"],
  ENOSPC: [28, "No space left on device"],
  ENOTEMPTY: [39, "Directory not empty"],
  EROFS: [30, "Read-only file system"],
  EOUTSIDE: [13, "Permission denied"],
};

class FileCallError extends Error {
  constructor(
    readonly errno: string,
    readonly path: string,
  ) {
    super(`${(ERRNO[errno] ?? ERRNO.EINVAL!)[1]}: '${path}'`);
  }
}

interface OpenFile {
  path: string;
  content: Buffer;
  position: number;
  readable: boolean;
  writable: boolean;
  append: boolean;
  dirty: boolean;
}

interface ExecResult {
  output: Buffer[];
  error: { error_code: number; error_message: string } | undefined;
}

type ExecRequest = {
  task_id: string;
  file_open_request?: { file_descriptor?: string; path: string; mode: string } | null;
  file_write_request?: { file_descriptor: string; data: Buffer } | null;
  file_read_request?: { file_descriptor: string; n?: number } | null;
  file_flush_request?: { file_descriptor: string } | null;
  file_read_line_request?: { file_descriptor: string } | null;
  file_seek_request?: { file_descriptor: string; offset: number; whence: number } | null;
  file_delete_bytes_request?: { file_descriptor: string; start_inclusive?: number; end_exclusive?: number } | null;
  file_write_replace_bytes_request?: { file_descriptor: string; data: Buffer; start_inclusive?: number; end_exclusive?: number } | null;
  file_close_request?: { file_descriptor: string } | null;
  file_ls_request?: { path: string } | null;
  file_mkdir_request?: { path: string; make_parents: boolean } | null;
  file_rm_request?: { path: string; recursive: boolean } | null;
  file_watch_request?: { path: string } | null;
};

/**
 * Modal's legacy container file API, `ContainerFilesystemExec` and its output stream
 * `ContainerFilesystemExecGetOutput` (the 0.7.x SDK's `sb.open()` and `SandboxFile`): open with a
 * Python-style mode (r, w, a, x, with +), read (n bytes or the rest), read line, write, seek,
 * flush, close, delete or replace a byte range, and the path calls ls, mkdir and rm. Every call's
 * work is done before its exec id is returned; its output is one batch (`eof`), or an error batch
 * with the errno and its text (the SDK retries it, then raises `SandboxFilesystemError`). Files
 * are read and written through the jail's own file ops, as the sandbox user.
 */
export function legacyFilesHandlers(deps: { sandboxes: SandboxManager }): Record<string, GrpcHandler> {
  const openFiles = new WeakMap<SandboxRecord, Map<string, OpenFile>>();
  const results = new Map<string, ExecResult>();
  const filesOf = (record: SandboxRecord) => {
    let files = openFiles.get(record);
    if (!files) openFiles.set(record, (files = new Map()));
    return files;
  };

  const handleOf = (record: SandboxRecord, fd: string): OpenFile => {
    const file = filesOf(record).get(fd);
    if (!file) throw new FileCallError("EBADF", fd);
    return file;
  };
  const flush = async (jail: SandboxFiles, file: OpenFile) => {
    if (!file.dirty) return;
    await jail.write(file.path, file.content).catch(rethrow(file.path));
    file.dirty = false;
  };

  const run = async (record: SandboxRecord, request: ExecRequest): Promise<{ output: Buffer[]; fd?: string }> => {
    const files = record.jail!.files;
    if (request.file_open_request) {
      const { path, mode } = request.file_open_request;
      if (!path.startsWith("/")) throw new FileCallError("EINVAL", path);
      const flags = parseMode(mode, path);
      let content: Buffer = Buffer.alloc(0);
      const existing = await files.stat(path, { follow: true }).catch(() => undefined);
      if (existing?.type === "directory") throw new FileCallError("EISDIR", path);
      if (flags.exclusive && existing) throw new FileCallError("EEXIST", path);
      if (!existing && !flags.create) throw new FileCallError("ENOENT", path);
      if (existing && !flags.truncate) {
        if (existing.size > MAX_OPEN_FILE_BYTES) throw new FileCallError("EFBIG", path);
        content = await files.read(path, { maxBytes: MAX_OPEN_FILE_BYTES }).catch(rethrow(path));
      }
      const file: OpenFile = {
        path,
        content,
        position: flags.append ? content.length : 0,
        readable: flags.readable,
        writable: flags.writable,
        append: flags.append,
        dirty: !existing || flags.truncate,
      };
      // Creating or truncating happens at open, as open(2) does.
      if (file.dirty) await flush(files, file);
      const fd = request.file_open_request.file_descriptor || randomUUID();
      filesOf(record).set(fd, file);
      return { output: [], fd };
    }
    if (request.file_read_request) {
      const file = handleOf(record, request.file_read_request.file_descriptor);
      if (!file.readable) throw new FileCallError("EBADF", file.path);
      const n = request.file_read_request.n;
      const end = n === undefined || n === null ? file.content.length : Math.min(file.content.length, file.position + n);
      const data = file.content.subarray(file.position, end);
      file.position = Math.max(file.position, end);
      return { output: data.length ? [Buffer.from(data)] : [] };
    }
    if (request.file_read_line_request) {
      const file = handleOf(record, request.file_read_line_request.file_descriptor);
      if (!file.readable) throw new FileCallError("EBADF", file.path);
      const newline = file.content.indexOf(10, file.position);
      const end = newline < 0 ? file.content.length : newline + 1;
      const data = file.content.subarray(file.position, end);
      file.position = end;
      return { output: data.length ? [Buffer.from(data)] : [] };
    }
    if (request.file_write_request) {
      const file = handleOf(record, request.file_write_request.file_descriptor);
      if (!file.writable) throw new FileCallError("EBADF", file.path);
      const at = file.append ? file.content.length : file.position;
      file.content = splice(file.content, at, at + request.file_write_request.data.length, request.file_write_request.data);
      file.position = at + request.file_write_request.data.length;
      file.dirty = true;
      if (file.content.length > MAX_OPEN_FILE_BYTES) throw new FileCallError("EFBIG", file.path);
      return { output: [] };
    }
    if (request.file_seek_request) {
      const { file_descriptor, offset, whence } = request.file_seek_request;
      const file = handleOf(record, file_descriptor);
      const base = whence === 1 ? file.position : whence === 2 ? file.content.length : 0;
      if (base + offset < 0) throw new FileCallError("EINVAL", file.path);
      file.position = base + offset;
      return { output: [] };
    }
    if (request.file_delete_bytes_request || request.file_write_replace_bytes_request) {
      const spec = (request.file_delete_bytes_request ?? request.file_write_replace_bytes_request)!;
      const file = handleOf(record, spec.file_descriptor);
      if (!file.writable) throw new FileCallError("EBADF", file.path);
      const start = spec.start_inclusive ?? 0;
      const end = spec.end_exclusive ?? file.content.length;
      if (start > end || end > file.content.length) throw new FileCallError("EINVAL", file.path);
      const data = request.file_write_replace_bytes_request?.data ?? Buffer.alloc(0);
      file.content = splice(file.content, start, end, data);
      file.dirty = true;
      return { output: [] };
    }
    if (request.file_flush_request) {
      const file = handleOf(record, request.file_flush_request.file_descriptor);
      await flush(files, file);
      return { output: [] };
    }
    if (request.file_close_request) {
      const fd = request.file_close_request.file_descriptor;
      const file = handleOf(record, fd);
      await flush(files, file);
      filesOf(record).delete(fd);
      return { output: [] };
    }
    if (request.file_ls_request) {
      const { path } = request.file_ls_request;
      const info = await files.stat(path, { follow: true }).catch(rethrow(path));
      if (info.type !== "directory") throw new FileCallError("ENOTDIR", path);
      const entries = await files.list(path, { depth: 1 }).catch(rethrow(path));
      return { output: [Buffer.from(JSON.stringify({ paths: entries.map((entry) => entry.name).sort() }))] };
    }
    if (request.file_mkdir_request) {
      const { path, make_parents } = request.file_mkdir_request;
      const made = await files.mkdir(path, { parents: make_parents }).catch(rethrow(path));
      if (!made.created && !make_parents) throw new FileCallError("EEXIST", path);
      return { output: [] };
    }
    if (request.file_rm_request) {
      const { path, recursive } = request.file_rm_request;
      await files.remove(path, { recursive }).catch(rethrow(path));
      return { output: [] };
    }
    if (request.file_watch_request) {
      throw new GrpcError(GrpcStatus.UNIMPLEMENTED, "emulator limit: file watches are not emulated (no inotify bridge)");
    }
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "ContainerFilesystemExec: no file request given");
  };

  const keep = (execId: string, result: ExecResult) => {
    results.set(execId, result);
    while (results.size > KEPT_RESULTS) results.delete(results.keys().next().value!);
  };

  return {
    async ContainerFilesystemExec(request: ExecRequest, call: GrpcCall) {
      void call;
      const record = await deps.sandboxes.runningTask(request.task_id);
      const execId = `fs-${randomUUID()}`;
      try {
        const done = await run(record, request);
        keep(execId, { output: done.output, error: undefined });
        return { exec_id: execId, ...(done.fd !== undefined ? { file_descriptor: done.fd } : {}) };
      } catch (error) {
        if (!(error instanceof FileCallError)) throw error;
        const [code] = ERRNO[error.errno] ?? ERRNO.EINVAL!;
        keep(execId, { output: [], error: { error_code: code, error_message: error.message } });
        return { exec_id: execId };
      }
    },

    async ContainerFilesystemExecGetOutput(request: { exec_id: string }, call: GrpcCall) {
      const result = results.get(request.exec_id);
      if (!result) throw new GrpcError(GrpcStatus.NOT_FOUND, `exec ${request.exec_id} not found`);
      // An error batch carries no eof: the SDK retries such a batch, then raises its message.
      if (result.error) call.write({ output: [], error: result.error, batch_index: 0, eof: false });
      else call.write({ output: result.output, batch_index: 0, eof: true });
    },
  };
}

function parseMode(mode: string, path: string) {
  const base = mode.replace(/[bt]/g, "");
  const plus = base.includes("+");
  const kind = base.replace("+", "");
  if (!["r", "w", "a", "x"].includes(kind) || base.length > 2) throw new FileCallError("EINVAL", path);
  return {
    readable: kind === "r" || plus,
    writable: kind !== "r" || plus,
    create: kind !== "r",
    truncate: kind === "w",
    append: kind === "a",
    exclusive: kind === "x",
  };
}

function splice(content: Buffer, start: number, end: number, data: Buffer): Buffer {
  const head = content.subarray(0, Math.min(start, content.length));
  const gap = start > content.length ? Buffer.alloc(start - content.length) : Buffer.alloc(0);
  return Buffer.concat([head, gap, data, content.subarray(Math.min(end, content.length))]);
}

function rethrow(path: string) {
  return (error: unknown): never => {
    const code = (error as { code?: string }).code;
    if (code && ERRNO[code]) throw new FileCallError(code, path);
    throw error;
  };
}
