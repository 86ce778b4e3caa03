import type { Readable, Writable } from "node:stream";

/**
 * The one thing a provider must supply to reuse the kit's exec and sync mechanics: a way to run a
 * POSIX `sh -c <script>` inside its sandbox with byte streams attached.
 *
 * Contract for implementations (what `capabilities` does not qualify):
 * - The script runs as the sandbox user with `sh -c`, in a new process group (or session) of its own,
 *   so that `signal` can end the whole group, background children included.
 * - `stdin`: bytes are written to the script's stdin, then stdin is closed (EOF). `null`/absent means
 *   an immediately closed stdin (never the provider's own stdin).
 * - `stdout` / `stderr`: every chunk is written to the given sink in order; `run` resolves only after
 *   both streams have been fully delivered.
 * - `signal`: when aborted, the provider ends the script's whole process group (SIGTERM, then SIGKILL
 *   after `killGraceMs`) and resolves with `reason: "aborted"` once the group is gone.
 * - `timeoutMs`: when `capabilities.remoteTimeout` is set, the sandbox side ends the group at this
 *   deadline (so a crashed worker never leaves the command running) and the exit says `reason: "timeout"`.
 * - Rejects only for transport failures (sandbox gone, connection lost), never for a non-zero exit.
 *
 * A transport that cannot meet part of this says so in `capabilities`; the kit's adapters
 * (`packages/kit/src/transports/`) turn the common weaker shapes into the full contract, and
 * `syncFor` refuses what a transport cannot carry safely.
 */
export interface ScriptRunner {
  readonly capabilities: TransportCapabilities;
  run(script: string, io: ScriptIo): Promise<ScriptExit>;
  /** Pseudo-terminals in the sandbox; present exactly when `capabilities.pty` is true. */
  readonly pty?: PtyTransport;
}

/** What a transport can do; the kit picks strategies from this and never guesses. */
export interface TransportCapabilities {
  /**
   * `stream`: stdin bytes flow while the script runs (a pipe). `buffered`: the whole stdin must be
   * known before the call (request/response APIs). `none`: the transport has no stdin at all.
   */
  stdin: "stream" | "buffered" | "none";
  /** The script sees EOF after the last stdin byte (false: e.g. a socket that cannot half-close). */
  stdinEof: boolean;
  /** Every byte of stdin, stdout and stderr arrives unchanged (false: e.g. output carried as JSON strings). */
  binarySafe: boolean;
  /** Output reaches the sinks while the script runs (false: all of it arrives at the end). */
  liveOutput: boolean;
  /** stdout and stderr arrive apart (false: one combined stream). */
  separateStderr: boolean;
  /** What an abort can reach: the whole process group, only the script's pid, or nothing remote. */
  signals: "group" | "pid" | "none";
  /** The sandbox side honours `ScriptIo.timeoutMs` and reports `reason: "timeout"`. */
  remoteTimeout: boolean;
  /** Largest script (bytes of UTF-8) one call accepts; absent means no limit the kit must respect. */
  maxScriptBytes?: number;
  /** Largest stdin one call accepts (buffered transports); absent means unbounded (streamed). */
  maxStdinBytes?: number;
  /**
   * The runner can run a program on a real pseudo-terminal (`runner.pty`): the host's agent login
   * (`supportsLoginPty`) is offered only then. Absent means false.
   */
  pty?: boolean;
}

/** The full contract: what the local runner and the bubblewrap supervisor provide. */
export const STREAM_TRANSPORT: TransportCapabilities = Object.freeze({
  stdin: "stream",
  stdinEof: true,
  binarySafe: true,
  liveOutput: true,
  separateStderr: true,
  signals: "group",
  remoteTimeout: false,
});

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
  /**
   * Deadline the sandbox side enforces (only when `capabilities.remoteTimeout`). The kit still keeps
   * its own local timer as a backstop, a little later.
   */
  timeoutMs?: number;
}

/**
 * Why a script ended, recorded once: on its own (`exit`, with its code), by a signal it did not
 * ask for (`signal`), at the deadline (`timeout`: the sandbox side's `io.timeoutMs`, or a runner's
 * own ceiling), or because `io.signal` aborted it (`aborted`). Nothing else says it.
 */
export type TerminationReason = "exit" | "signal" | "timeout" | "aborted";

export interface ScriptExit {
  /** The script's exit status; null when it did not exit on its own (timeout, abort, signal). */
  exitCode: number | null;
  signal: string | null;
  reason: TerminationReason;
  /** The script's pid in the sandbox, when the transport knows it. */
  pid?: number;
}

/** The exit of a run that `io.signal` ended (`signal`: what ended the group, when known). */
export function abortedExit(signal: string | null = null, pid?: number): ScriptExit {
  return { exitCode: null, signal, reason: "aborted", ...(pid === undefined ? {} : { pid }) };
}

/** The exit of a run its deadline ended. */
export function timedOutExit(signal: string | null = "SIGKILL", pid?: number): ScriptExit {
  return { exitCode: null, signal, reason: "timeout", ...(pid === undefined ? {} : { pid }) };
}

/**
 * A vendor's file API, for sync strategies that move archives as files rather than over stdin.
 * Paths are absolute sandbox paths; the kit confines them before calling.
 */
export interface FileTransport {
  /** Writes `source` to `path` (created or replaced), then applies `mode` when given. */
  upload(path: string, source: Readable, opts?: { mode?: number; size?: number; signal?: AbortSignal }): Promise<void>;
  /**
   * The bytes of `path`; rejects when it does not exist. `size`: what the caller expects, when it
   * knows (a transport may choose how to move the bytes by it).
   */
  download(path: string, opts?: { signal?: AbortSignal; size?: number }): Promise<Readable>;
  /** Largest single upload the vendor accepts, when it has a limit. */
  readonly maxUploadBytes?: number;
}

/**
 * A program on a real pseudo-terminal in the sandbox: it sees a terminal on stdin/stdout/stderr
 * (`isatty`), the terminal echoes and edits input as a terminal does, `^C` written to it interrupts
 * the foreground program, a resize reaches it as SIGWINCH. Bytes both ways, unchanged.
 */
export interface PtyTransport {
  /** Starts `sh -c script` as the leader of a new session whose controlling terminal is the PTY. */
  open(spec: PtySpec): Promise<PtyProcess>;
}

export interface PtySize {
  cols: number;
  rows: number;
}

export interface PtySpec extends PtySize {
  script: string;
  /** Environment of the program (added to the sandbox's own; `TERM` is the caller's to set). */
  env?: Record<string, string>;
  /** Absolute sandbox path to start in (default: the sandbox's default directory). */
  cwd?: string;
  /** Every output byte of the terminal, in order, from the first one on. */
  onData(bytes: Buffer): void;
  /** Aborts an open that is still under way (the program, if started, is ended). */
  signal?: AbortSignal;
}

/** How a program on a PTY ended: its exit code, or the signal that ended it. */
export interface PtyExit {
  exitCode: number | null;
  signal: string | null;
}

export type PtySignal = "SIGINT" | "SIGTERM" | "SIGKILL" | "SIGHUP";

export interface PtyProcess {
  /** Bytes to the terminal's input, in call order (as typed: `\r` is Enter, `\x03` is ^C). */
  write(bytes: Buffer): Promise<void>;
  resize(size: PtySize): Promise<void>;
  /** Signals the session's process group (default SIGTERM); a no-op once it has ended. */
  kill(signal?: PtySignal): Promise<void>;
  /** Settles once the program has ended and every output byte went to `onData`; never rejects. */
  readonly exited: Promise<PtyExit>;
  /** Ends the program if it still runs (hang-up, then SIGKILL) and releases the transport. Idempotent. */
  close(): Promise<void>;
}
