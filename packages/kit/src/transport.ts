import type { Readable, Writable } from "node:stream";

/**
 * The one thing a provider must supply to reuse the kit's exec and sync mechanics: a way to run a
 * POSIX `sh -c <script>` inside its sandbox with byte streams attached.
 *
 * Contract for implementations:
 * - The script runs as the sandbox user with `sh -c`, in a new process group (or session) of its own,
 *   so that `signal` can end the whole group, background children included.
 * - `stdin`: bytes are written to the script's stdin, then stdin is closed (EOF). `null`/absent means
 *   an immediately closed stdin (never the provider's own stdin).
 * - `stdout` / `stderr`: every chunk is written to the given sink in order; `run` resolves only after
 *   both streams have been fully delivered.
 * - `signal`: when aborted, the provider ends the script's whole process group (SIGTERM, then SIGKILL
 *   after `killGraceMs`) and resolves with `aborted: true` once the group is gone.
 * - Rejects only for transport failures (sandbox gone, connection lost), never for a non-zero exit.
 */
export interface ScriptRunner {
  run(script: string, io: ScriptIo): Promise<ScriptExit>;
}

export interface ScriptIo {
  stdin?: Readable | Buffer | string | null;
  stdout?: Writable | ((chunk: Buffer) => void);
  stderr?: Writable | ((chunk: Buffer) => void);
  /**
   * Extra environment for the `sh` process itself (the command's env is set inside the script).
   * Used to pass opaque values (e.g. a post-upload command) without splicing them into the script.
   */
  env?: Record<string, string>;
  signal?: AbortSignal;
  /** Grace between SIGTERM and SIGKILL when `signal` aborts. Default 250 ms. */
  killGraceMs?: number;
}

export interface ScriptExit {
  exitCode: number | null;
  signal: string | null;
  /** True when the run ended because `io.signal` aborted it. */
  aborted: boolean;
}
