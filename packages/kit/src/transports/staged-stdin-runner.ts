import { randomBytes } from "node:crypto";
import { shellQuote } from "../exec/quote.js";
import { abortedExit, type ScriptRunner } from "../transport.js";
import { EXIT_STDIN_STAGING_FAILED } from "../exec/script.js";

export interface StagedStdinOptions {
  /**
   * Writes `bytes` to `path` inside the sandbox through the vendor's file API, creating the file
   * with mode 0600 (never wider first) and its directory if needed; `dir` is the fresh directory
   * `path` is in (a vendor whose upload cannot set a mode creates it 0700 first).
   */
  stage(target: { dir: string; path: string }, bytes: Buffer, signal: AbortSignal | undefined): Promise<void>;
  /** Known stdin up to this size goes to the inner runner unchanged (it may carry it inline). Default 0. */
  thresholdBytes?: number;
  /** Sandbox directory the staging directories are made in (default /tmp). */
  baseDir?: string;
}

/**
 * Stdin known in full (a string or a buffer, e.g. an execute's) travels as a file: it is written
 * through the vendor's file API into a fresh private directory, and the script opens it as its
 * stdin and removes the directory before anything else runs, so nothing is left on disk afterwards
 * even when the command is killed. A stream (sync archives) is passed through to the inner runner.
 * Costs one file call per staged execute; a run that fails before the script starts removes the
 * directory with one more call.
 */
export function withStagedStdin(inner: ScriptRunner, opts: StagedStdinOptions): ScriptRunner {
  const threshold = opts.thresholdBytes ?? 0;
  const base = opts.baseDir ?? "/tmp";
  return {
    capabilities: inner.capabilities,
    async run(script, io) {
      const input = io.stdin;
      const known = typeof input === "string" ? Buffer.from(input, "utf8") : Buffer.isBuffer(input) ? input : undefined;
      if (known === undefined || known.length === 0 || known.length <= threshold) return inner.run(script, io);
      if (io.signal?.aborted) return abortedExit();
      const dir = `${base}/.paperclip-stdin.${randomBytes(12).toString("hex")}`;
      const path = `${dir}/stdin`;
      const cleanup = () =>
        inner.run(`rm -rf -- ${shellQuote(dir)}`, {}).then(
          () => undefined,
          () => undefined,
        );
      try {
        await opts.stage({ dir, path }, known, io.signal);
      } catch (error) {
        await cleanup();
        throw error;
      }
      // Opened, then unlinked at once: the command still reads a regular file with a real EOF.
      // (A failed redirection of `exec` ends sh with status 2 before any `||`: test first.)
      const staged = `[ -r ${shellQuote(path)} ] || { echo 'paperclip: could not open staged stdin' >&2; rm -rf -- ${shellQuote(dir)}; exit ${EXIT_STDIN_STAGING_FAILED}; }\nexec 0<${shellQuote(path)}\nrm -rf -- ${shellQuote(dir)}\n${script}`;
      try {
        return await inner.run(staged, { ...io, stdin: null });
      } catch (error) {
        // The run failed (perhaps before the script removed the file): remove it, best effort.
        await cleanup();
        throw error;
      }
    },
  };
}
