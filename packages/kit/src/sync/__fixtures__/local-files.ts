import fs from "node:fs";
import fsp from "node:fs/promises";
import type { FileTransport } from "../../transport.js";

export interface RecordingFileTransport extends FileTransport {
  /** "upload" / "download", in call order (for asserting which vendor calls a strategy made). */
  calls: string[];
}

/**
 * A vendor file API backed by the host file system (the test "sandbox" is a host temp directory),
 * each call recorded. One shared double so the sync and transport tests count vendor calls the same
 * way. Pass `calls` to record into a log shared with other vendor calls (e.g. "exec").
 */
export function createTestFileTransport(calls: string[] = []): RecordingFileTransport {
  return {
    calls,
    async upload(target, source, opts) {
      calls.push("upload");
      await fsp.writeFile(target, source, { mode: opts?.mode ?? 0o644 });
    },
    async download(target) {
      calls.push("download");
      return fs.createReadStream(target);
    },
  };
}
