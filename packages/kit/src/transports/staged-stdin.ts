import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { shellQuote } from "../exec/quote.js";
import type { FileTransport, ScriptIo } from "../transport.js";
import { collectStdin } from "./collect.js";

/**
 * Stdin known in full up to this size rides inside the command itself (base64), so an execute with
 * stdin is still one call; its base64 stays under Linux's 128 KiB per argument.
 */
export const INLINE_STDIN_BYTES = 48 * 1024;

/** How a script without a stdin pipe gets its stdin: none, inline bytes (a heredoc), or a sandbox file (removed afterwards). */
export type StagedStdin = { kind: "none" } | { kind: "inline"; bytes: Buffer } | { kind: "file"; path: string };

export interface StageStdinOptions {
  /** The vendor's file API: stdin above the inline limit (or of unknown length) is uploaded (one more call). Without it, all of stdin must fit inline. */
  files?: FileTransport;
  inlineBytes?: number;
  /** Sandbox directory for the uploaded file (default `/tmp`). */
  scratchDir?: string;
  signal?: AbortSignal;
}

/** Decides how `io.stdin` reaches a script that has no stdin pipe, uploading it when it must. */
export async function stageStdin(input: ScriptIo["stdin"], opts: StageStdinOptions): Promise<StagedStdin> {
  if (input === undefined || input === null) return { kind: "none" };
  const inlineLimit = opts.inlineBytes ?? INLINE_STDIN_BYTES;
  const known = typeof input === "string" || Buffer.isBuffer(input) ? input : null;
  // Without a file API everything must fit inline (collectStdin refuses more).
  if (!opts.files) return { kind: "inline", bytes: (await collectStdin(input, inlineLimit)) ?? Buffer.alloc(0) };
  if (known !== null && (typeof known === "string" ? Buffer.byteLength(known, "utf8") : known.length) <= inlineLimit) {
    return { kind: "inline", bytes: (await collectStdin(known)) ?? Buffer.alloc(0) };
  }
  // Large or of unknown length (e.g. a whole archive): one upload, streamed.
  const path = `${opts.scratchDir ?? "/tmp"}/.paperclip-stdin.${randomBytes(12).toString("hex")}`;
  const source = known === null ? (input as Readable) : Readable.from([typeof known === "string" ? Buffer.from(known, "utf8") : known]);
  await opts.files.upload(path, source, { mode: 0o600, ...(opts.signal ? { signal: opts.signal } : {}) });
  return { kind: "file", path };
}

/** Shell lines that run `run` (a command reading its stdin) with the staged stdin and leave its status in `$__pc_rc`. */
export function runWithStagedStdin(run: string, stdin: StagedStdin, nonce: string): string[] {
  if (stdin.kind === "none") return [`${run} </dev/null`, `__pc_rc=$?`];
  if (stdin.kind === "file") {
    const file = shellQuote(stdin.path);
    return [`${run} <${file}`, `__pc_rc=$?; rm -f -- ${file}`];
  }
  const eof = `PCB64${nonce}`;
  return [`base64 -d <<'${eof}' | ${run}`, wrap76(stdin.bytes.toString("base64")), eof, `__pc_rc=$?`];
}

function wrap76(base64: string): string {
  const lines: string[] = [];
  for (let i = 0; i < base64.length; i += 76) lines.push(base64.slice(i, i + 76));
  return lines.join("\n");
}
