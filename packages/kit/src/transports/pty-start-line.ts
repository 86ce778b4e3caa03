import { randomBytes } from "node:crypto";

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
