import { Readable } from "node:stream";
import { createFileStdioRunner, withRemoteGroupKill, type FileTransport, type ScriptRunner } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import type { DaytonaHandle } from "./sandboxes.js";

/** Toolbox answers that mean the proxy never reached the daemon: the command did not run, so it may be sent again. */
export const NOT_RUN_STATUSES = [429, 502, 503] as const;

/**
 * Daytona's file API (toolbox bulk upload/download, streamed). Uploads carry no mode: the kit asks
 * only for 0600 scratch files, every process of a Daytona sandbox runs as its one user, and a chmod
 * would be a second call per upload.
 */
export function daytonaFiles(client: DaytonaClient, handle: DaytonaHandle): FileTransport {
  return {
    upload: (path, source, opts) =>
      client.call("uploadFile", () => handle.sandbox.fs.uploadFileStream(source, path, opts?.signal ? { signal: opts.signal } : {}), {
        idempotent: false,
        attempts: 1, // the source stream is consumed by the first attempt
      }),
    download: (path, opts) =>
      client.call("downloadFile", async () => (await handle.sandbox.fs.downloadFileStream(path, opts?.signal ? { signal: opts.signal } : {})) as Readable, {
        idempotent: true,
      }),
  };
}

/**
 * `process/execute` (no stdin, stdout and stderr combined) as a full ScriptRunner: the kit's
 * file-stdio runner carries stdout, stderr and the exit status back base64 between markers (one
 * call per command; large stdin is uploaded first), and an abort or timeout ends the command's
 * process group from a second call (Daytona has no signal API).
 */
export function daytonaRunner(client: DaytonaClient, handle: DaytonaHandle, files: FileTransport): ScriptRunner {
  const combined = createFileStdioRunner({
    files,
    exec: async ({ command }) => {
      const response = await client.call("executeCommand", () => handle.sandbox.process.executeCommand(command), { idempotent: false, notProcessed: NOT_RUN_STATUSES });
      return { exitCode: response.exitCode ?? null, output: response.result };
    },
  });
  return withRemoteGroupKill(combined);
}
