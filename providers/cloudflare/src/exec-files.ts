import { Readable } from "node:stream";
import { collectStdin, type FileTransport } from "@paperclip-sandbox/kit";
import type { BridgeClient } from "./bridge-client.js";
import { inSession, type RunnerTarget } from "./sessions.js";

/** Largest file one upload carries (base64 in upstream's `stdin` text field: a third more on the wire). */
const EXEC_UPLOAD_MAX_BYTES = 16 * 1024 * 1024;
const UPLOAD_TIMEOUT_MS = 600_000;

/**
 * A file API over upstream's `POST /exec` alone, for a bridge without this repository's file routes:
 * a file travels base64 in the exec's `stdin` field (UTF-8 text, which the template writes to a file
 * and redirects: no argument limit) and is decoded in the sandbox. One request per file. It lets the
 * kit's file-stdio runner take stdin far past what fits inside a command (48 KiB), so base64 sync
 * moves 3 MiB per call instead of 36 KiB.
 */
export function execFiles(client: BridgeClient, target: RunnerTarget): FileTransport {
  return {
    maxUploadBytes: EXEC_UPLOAD_MAX_BYTES,
    async upload(path, source, opts) {
      const bytes = (await collectStdin(source, EXEC_UPLOAD_MAX_BYTES)) ?? Buffer.alloc(0);
      const mode = (opts?.mode ?? 0o600).toString(8);
      const answer = await inSession(target, (sessionId) =>
        client.exec(
          {
            providerLeaseId: target.providerLeaseId,
            command: "/bin/sh",
            args: ["-c", 'umask 077; base64 -d > "$1.part" && chmod "$2" "$1.part" && mv -f "$1.part" "$1"', "sh", path, mode],
            stdin: bytes.toString("base64"),
            timeoutMs: UPLOAD_TIMEOUT_MS,
            sessionStrategy: target.sessionStrategy,
            sessionId,
          },
          opts?.signal,
        ),
      );
      if (answer.exitCode !== 0) throw new Error(`writing ${path} in the sandbox failed (exit ${String(answer.exitCode)}): ${answer.stderr.trim()}`);
    },
    async download(path, opts) {
      const answer = await inSession(target, (sessionId) =>
        client.exec(
          { providerLeaseId: target.providerLeaseId, command: "/bin/sh", args: ["-c", 'base64 < "$1"', "sh", path], timeoutMs: UPLOAD_TIMEOUT_MS, sessionStrategy: target.sessionStrategy, sessionId },
          opts?.signal,
        ),
      );
      if (answer.exitCode !== 0) throw new Error(`reading ${path} in the sandbox failed (exit ${String(answer.exitCode)}): ${answer.stderr.trim()}`);
      return Readable.from([Buffer.from(answer.stdout.replace(/\s+/g, ""), "base64")]);
    },
  };
}
