import { randomBytes } from "node:crypto";
import { shellQuote } from "../exec/quote.js";
import { envPrologue } from "./inline-env.js";
import { runWithStagedStdin, type StagedStdin } from "./staged-stdin.js";

/**
 * Carries a script's stdout, stderr and exit status back through ONE combined text output (an exec
 * API that merges the streams and may not be binary-safe): the script's streams go to files, and the
 * wrapper then prints them base64-encoded between per-call markers. Anything the vendor's shell
 * prints before the first marker (profile noise) is ignored.
 */
export interface MuxedScript {
  command: string;
  nonce: string;
}

export interface MuxOptions {
  /** Sandbox directory for the per-call scratch directory (default `${TMPDIR:-/tmp}`). */
  scratchDir?: string;
  /** How the script gets its stdin (`stageStdin`). */
  stdin: StagedStdin;
  /** Exported before the script runs (a name a shell cannot hold is refused). */
  env?: Record<string, string>;
}

export function newMuxNonce(): string {
  return randomBytes(12).toString("hex");
}

export function muxScript(script: string, opts: MuxOptions, nonce = newMuxNonce()): MuxedScript {
  const mark = `PCMUX${nonce}`;
  const dir = opts.scratchDir === undefined ? `"\${TMPDIR:-/tmp}"` : shellQuote(opts.scratchDir);
  const lines = [`umask 077`, `__pc_io=${dir}/.paperclip-io.${nonce}`, `mkdir -- "$__pc_io" || { printf '\\n%s:%d\\n' '${mark}X' 125; exit 125; }`];
  const exports = envPrologue(opts.env);
  if (exports) lines.push(exports.trimEnd());
  lines.push(...runWithStagedStdin(`( exec /bin/sh -c ${shellQuote(script)} ) >"$__pc_io/o" 2>"$__pc_io/e"`, opts.stdin, nonce));
  lines.push(
    // An empty output file costs no base64 process (`[` is a shell builtin).
    `printf '\\n%s\\n' '${mark}O'; [ ! -s "$__pc_io/o" ] || base64 <"$__pc_io/o"; printf '\\n%s\\n' '${mark}E'; [ ! -s "$__pc_io/e" ] || base64 <"$__pc_io/e"`,
    `printf '\\n%s:%d\\n' '${mark}X' "$__pc_rc"`,
    `rm -rf -- "$__pc_io"`,
  );
  return { command: lines.join("\n"), nonce };
}

export interface DemuxedOutput {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
}

export class MuxFormatError extends Error {
  override name = "MuxFormatError";
}

/** Parses what `muxScript`'s wrapper printed; throws when the markers are missing (the wrapper never ran to its end). */
export function demuxOutput(output: Buffer | string, nonce: string): DemuxedOutput {
  const text = typeof output === "string" ? output : output.toString("latin1");
  const mark = `PCMUX${nonce}`;
  const exitMatch = new RegExp(`\\n${mark}X:(\\d+)\\n`).exec(text);
  if (!exitMatch) throw new MuxFormatError("the sandbox did not report the command's exit (its output ended early or the wrapper failed)");
  const exitCode = Number(exitMatch[1]);
  const outStart = text.indexOf(`\n${mark}O\n`);
  const errStart = text.indexOf(`\n${mark}E\n`);
  if (outStart < 0 || errStart < outStart || exitMatch.index < errStart) {
    // e.g. the scratch directory could not be made: only the exit line was printed.
    return { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), exitCode };
  }
  const decode = (from: number, to: number) => Buffer.from(text.slice(from, to).replace(/\s+/g, ""), "base64");
  return {
    stdout: decode(outStart + mark.length + 3, errStart),
    stderr: decode(errStart + mark.length + 3, exitMatch.index),
    exitCode,
  };
}
