import { randomBytes } from "node:crypto";
import { shellQuote } from "../exec/quote.js";
import type { PtyExit, PtyProcess, PtySignal, PtySize, PtySpec, PtyTransport, ScriptRunner } from "../transport.js";
import { checkPtySignal, endsWithin, hangUpPty } from "./pty-hangup.js";
import { checkPtySize, ptyResizeLine, PtyUnavailableError } from "./script-pty.js";

/** What is kept of a terminal's output while its start line is awaited. */
const STARTUP_KEEP = 64 * 1024;

/** The program's process (it leads the terminal's session) and its terminal, from the start line. */
export interface PtyStart {
  pid: number;
  tty: string;
}

/**
 * The first line a PTY wrapper prints, for vendor terminals whose program is not started alone: a
 * login shell that a typed line replaces (Daytona), or an exec whose size and environment a wrapper
 * sets first (Modal). The line carries a random marker, the wrapper's pid (the program's, after its
 * `exec`) and its terminal: what came before it (a shell's profile output, prompt, the echo of the
 * typed line) is dropped, what follows goes on as the program's bytes, and signals and resizes can
 * address the program from a second command.
 */
export class PtyStartLine {
  private readonly marker = randomBytes(12).toString("hex");
  private readonly pattern = new RegExp(`${this.marker}:(\\d+):([^:\\r\\n]*):\\r?\\n`);
  private seen = "";
  private start: PtyStart | undefined;
  private readonly waiters = new Set<(start: PtyStart) => void>();

  /** `onData` gets the program's bytes, from the first one after the start line. */
  constructor(private readonly onData: (bytes: Buffer) => void) {}

  /** The shell line that prints the start line (run by the wrapper right before it execs the program). */
  get shellLine(): string {
    return `printf '%s:%s:%s:\\n' ${this.marker} "$$" "$(tty 2>/dev/null)"`;
  }

  /** The start once the line was seen. */
  get started(): PtyStart | undefined {
    return this.start;
  }

  /** Terminal output, in order. */
  push(data: Uint8Array): void {
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (this.start) return this.onData(bytes);
    // latin1 keeps every byte one character: what follows the line goes on as the same bytes.
    this.seen = (this.seen + bytes.toString("latin1")).slice(-STARTUP_KEEP);
    const match = this.pattern.exec(this.seen);
    if (!match) return;
    const start: PtyStart = { pid: Number(match[1]), tty: match[2]! };
    this.start = start;
    const rest = this.seen.slice(match.index + match[0].length);
    this.seen = "";
    if (rest.length > 0) this.onData(Buffer.from(rest, "latin1"));
    for (const waiter of this.waiters) waiter(start);
    this.waiters.clear();
  }

  /** Calls `listener` at the start (at once if it has happened); returns its removal. */
  onStart(listener: (start: PtyStart) => void): () => void {
    if (this.start) {
      listener(this.start);
      return () => undefined;
    }
    this.waiters.add(listener);
    return () => this.waiters.delete(listener);
  }

  /** The end of what the terminal showed before any start line (escape sequences removed), for an error. */
  startupTail(max = 300): string {
    return Buffer.from(this.seen, "latin1")
      .toString("utf8")
      .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "")
      .trim()
      .slice(-max);
  }
}

/**
 * Resolves once `line` has started, or says why not: the program ended first, the open was
 * aborted, or `timeoutMs` passed.
 */
export function awaitPtyStart(line: PtyStartLine, ended: Promise<unknown>, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<"started" | "ended" | "timeout" | "aborted"> {
  return new Promise((resolve) => {
    let done = false;
    let off: () => void = () => undefined;
    const settle = (value: "started" | "ended" | "timeout" | "aborted") => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", abort);
      off();
      resolve(value);
    };
    const timer = setTimeout(() => settle("timeout"), opts.timeoutMs);
    const abort = () => settle("aborted");
    if (opts.signal?.aborted) return settle("aborted");
    opts.signal?.addEventListener("abort", abort, { once: true });
    off = line.onStart(() => settle("started"));
    if (done) off();
    void ended.then(
      () => settle(line.started ? "started" : "ended"),
      () => settle(line.started ? "started" : "ended"),
    );
  });
}

/** A vendor terminal opened by {@link startLinePty}'s `launch`, running the wrapper that prints the start line. */
export interface StartLineTerminal {
  /** Settles once the terminal's program has ended (null exit code when the vendor could not say); never rejects. */
  readonly exited: Promise<PtyExit>;
  /** Bytes to the terminal (called in order, never after the program ended). */
  write(bytes: Buffer): Promise<void>;
  /** The vendor's own resize; absent: a window-size change on the terminal through the runner. */
  resize?(size: PtySize): Promise<void>;
  /** The vendor's hard end (a session delete); absent: SIGKILL to the program's group through the runner. */
  forceEnd?(): Promise<void>;
  /** Drops the vendor's connection, once the program has ended or the open failed. */
  dispose(): Promise<void> | void;
}

export interface StartLinePtyOptions {
  /** Plain commands in the same sandbox: signals, and resizes when the terminal has none of its own. */
  runner: ScriptRunner;
  /** Opens the vendor's terminal for `spec` at `size`; its output goes to `startLine.push`, its wrapper prints `startLine.shellLine` right before it execs the program. */
  launch(spec: PtySpec, size: PtySize, startLine: PtyStartLine): Promise<StartLineTerminal>;
  /** What runs the wrapper, for the error when it ends first: "the sandbox's login shell". */
  launcher: string;
  /** The vendor's largest terminal side, when smaller than the kit's (`vendor` names it in the error). */
  maxSize?: { dimension: number; vendor: string };
  /** The vendor's error for a failed write (the kit rethrows what this returns). */
  writeError?(error: unknown): unknown;
  /** How long the wrapper may take to start the program. Default 60 s. */
  startTimeoutMs?: number;
  /** Grace between the hang-up and the hard end when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/**
 * Pseudo-terminals on a vendor's own terminal whose program does not start alone (a login shell that
 * a typed line replaces, an exec whose size and environment a wrapper sets first): the vendor part
 * opens the terminal and moves bytes; the kit waits for the start line, signals the program's group
 * through the runner (one call each), resizes through the runner when the vendor cannot, serializes
 * writes, and closes as a terminal that goes away (SIGHUP, then the hard end).
 */
export function startLinePty(options: StartLinePtyOptions): PtyTransport {
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const closeGraceMs = options.closeGraceMs ?? 1_000;
  const checkSize = (size: PtySize): PtySize => {
    const checked = checkPtySize(size);
    const max = options.maxSize;
    if (max && (checked.cols > max.dimension || checked.rows > max.dimension))
      throw new RangeError(`${max.vendor} terminals are at most ${max.dimension} columns and rows (got ${checked.cols}x${checked.rows})`);
    return checked;
  };

  return {
    async open(spec) {
      const size = checkSize(spec);
      if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
      const startLine = new PtyStartLine((bytes) => spec.onData(bytes));
      const terminal = await options.launch(spec, size, startLine);
      let ended = false;
      void terminal.exited.then(() => (ended = true));

      /** One runner call against the program's process group (it leads the terminal's session). */
      const signalGroup = async (signal: PtySignal) => {
        const pid = startLine.started?.pid;
        if (pid === undefined) return;
        const name = signal.slice(3);
        await options.runner.run(`kill -${name} -${pid} 2>/dev/null || kill -${name} ${pid} 2>/dev/null; exit 0`, {});
      };
      const forceEnd = () => (terminal.forceEnd ? terminal.forceEnd() : signalGroup("SIGKILL")).catch(() => undefined);

      const outcome = await awaitPtyStart(startLine, terminal.exited, { timeoutMs: startTimeoutMs, ...(spec.signal ? { signal: spec.signal } : {}) });
      if (outcome !== "started") {
        const tail = startLine.startupTail();
        await forceEnd();
        await terminal.dispose();
        throw new PtyUnavailableError(
          outcome === "ended"
            ? `${options.launcher} ended before the program started${tail ? `: ${tail}` : ""}`
            : outcome === "aborted"
              ? "the PTY open was aborted"
              : `the program did not start on the terminal within ${startTimeoutMs} ms`,
        );
      }
      const tty = startLine.started!.tty;

      let writes: Promise<void> = Promise.resolve();
      let closing: Promise<void> | undefined;
      return {
        exited: terminal.exited,
        write(bytes) {
          const next = writes.then(async () => {
            if (ended || bytes.length === 0) return;
            await terminal.write(bytes);
          });
          writes = next.catch(() => undefined);
          return next.catch((error: unknown) => {
            throw options.writeError ? options.writeError(error) : error;
          });
        },
        async resize(next) {
          const checked = checkSize(next);
          if (ended) return;
          if (terminal.resize) return terminal.resize(checked);
          if (!tty.startsWith("/dev/")) return;
          await options.runner.run(`__pc_tty=${shellQuote(tty)}; ${ptyResizeLine("__pc_tty", checked)}; exit 0`, {});
        },
        async kill(signal = "SIGTERM") {
          checkPtySignal(signal);
          if (ended) return;
          await (signal === "SIGKILL" && terminal.forceEnd ? terminal.forceEnd() : signalGroup(signal));
        },
        close() {
          closing ??= (async () => {
            if (!ended) await hangUpPty({ exited: terminal.exited, signalGroup, forceEnd, graceMs: closeGraceMs });
            await endsWithin(terminal.exited, closeGraceMs);
            await writes;
            await terminal.dispose();
            await terminal.exited;
          })();
          return closing;
        },
      } satisfies PtyProcess;
    },
  };
}
