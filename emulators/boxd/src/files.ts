import { posix } from "node:path";
import { PassThrough } from "node:stream";
import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import { SandboxFileError } from "@paperclip-sandbox/sandbox-backend";
import { GUEST_HOME } from "./exec.js";
import type { MachineManager } from "./machines.js";
import type { BoxdAccount } from "./options.js";

/** The decoded `UploadFileChunk` / `WriteFileChunk` fields. */
export interface FileChunk {
  vm_id: string;
  path: string;
  total_size: number;
  data: Buffer;
  mode?: number;
}

/** Largest file one upload may carry (the emulator's bound; boxd states none). */
const MAX_FILE_BYTES = 1024 * 1024 * 1024;
/** Where the guest user may write in the emulator (the rest of the tree is the host's, read-only). */
const WRITABLE_ROOTS = ["/workspace", GUEST_HOME, "/tmp"];

const ERRNO: Record<string, number> = {
  ENOENT: GrpcStatus.NOT_FOUND,
  EACCES: GrpcStatus.PERMISSION_DENIED,
  EROFS: GrpcStatus.PERMISSION_DENIED,
  EOUTSIDE: GrpcStatus.PERMISSION_DENIED,
  EISDIR: GrpcStatus.FAILED_PRECONDITION,
  ENOTDIR: GrpcStatus.FAILED_PRECONDITION,
};

/**
 * `UploadFileStream` (mode 0644) and the newer `WriteFile` (the given mode, applied at creation):
 * the first chunk names the machine, the path (relative paths are under the guest's home) and the
 * total size; the rest carry bytes. Missing parents are made. The bytes land through the backend's
 * in-jail file ops as the guest user, so a link the guest planted is replaced, never followed.
 */
export async function serveUpload(machines: MachineManager, account: BoxdAccount, input: AsyncIterable<FileChunk>, kind: "upload" | "write"): Promise<{ bytes_written: number }> {
  const iterator = input[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "the first chunk must carry vm_id and path");
  const head = first.value;
  if (!head.path) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "path: required in the first chunk");
  const machine = machines.find(account, head.vm_id);
  if (kind === "write" && machine.legacyAgent) {
    throw new GrpcError(GrpcStatus.UNIMPLEMENTED, `machine ${machine.name}: its agent predates WriteFile (use UploadFileStream)`);
  }
  const path = posix.resolve(GUEST_HOME, head.path);
  const mode = kind === "write" ? (head.mode || 0o644) & 0o777 : 0o644;
  const total = Number(head.total_size);
  if (total > MAX_FILE_BYTES) throw new GrpcError(GrpcStatus.RESOURCE_EXHAUSTED, `total_size: at most ${MAX_FILE_BYTES} bytes`);
  const lease = await machines.use(machine);
  const body = new PassThrough();
  let received = 0;
  const pump = (async () => {
    try {
      if (head.data.length > 0) {
        received += head.data.length;
        if (!body.write(head.data)) await new Promise((resolve) => body.once("drain", resolve));
      }
      for (;;) {
        const next = await iterator.next();
        if (next.done) break;
        received += next.value.data.length;
        if (received > MAX_FILE_BYTES) throw new GrpcError(GrpcStatus.RESOURCE_EXHAUSTED, `at most ${MAX_FILE_BYTES} bytes`);
        if (!body.write(next.value.data)) await new Promise((resolve) => body.once("drain", resolve));
      }
      body.end();
    } catch (error) {
      body.destroy(error as Error);
      throw error;
    }
  })();
  try {
    await Promise.all([lease.jail.files.write(path, body, { mode, createParents: true, roots: WRITABLE_ROOTS }), pump]);
  } catch (error) {
    if (error instanceof GrpcError) throw error;
    if (error instanceof SandboxFileError) throw new GrpcError(ERRNO[error.code] ?? GrpcStatus.INTERNAL, `${path}: ${error.message}`);
    throw new GrpcError(GrpcStatus.INTERNAL, `upload to ${path} failed: ${(error as Error).message}`);
  } finally {
    lease.done();
  }
  if (total > 0 && received !== total) throw new GrpcError(GrpcStatus.DATA_LOSS, `total_size was ${total} but ${received} bytes arrived`);
  return { bytes_written: received };
}
