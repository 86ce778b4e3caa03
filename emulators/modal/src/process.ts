import { constants } from "node:os";
import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import type { ExecExit, ExecHandle, OutputStreamName, OutputSubscription } from "@paperclip-sandbox/sandbox-backend";

/** What TaskExecWait / TaskExecPoll answer: an exit code, or the signal that ended the process. */
export type ExitStatus = { code: number } | { signal: number };

/**
 * One exec as the router sees it: stdin addressed by byte offset (a retried write is deduplicated,
 * a gap is refused), stdout/stderr readable from any offset and ended only once the process exits.
 */
export interface EmulatedProcess {
  readonly execId: string;
  writeStdin(offset: number, data: Buffer, eof: boolean): Promise<void>;
  stdinStatus(): { written: number; closed: boolean };
  /** Sends the stream's bytes from `offset` as they come; resolves at its end (or when `signal` aborts). */
  read(stream: OutputStreamName, offset: number, send: (data: Buffer) => void, signal: AbortSignal): Promise<void>;
  readonly exit: Promise<ExitStatus>;
  /** The exit once known, else null (TaskExecPoll). */
  exited(): ExitStatus | null;
  /** The sandbox ended: the process is gone (SIGKILL) and every read ends. */
  kill(): void;
}

/**
 * Stdin by offset. Writes apply in order; bytes before the cursor are a retry's duplicate and are
 * dropped, a write past the cursor is a lost write and is refused.
 */
export class StdinCursor {
  written = 0;
  closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly sink: (data: Buffer) => Promise<void>,
    private readonly close: () => Promise<void>,
  ) {}

  write(offset: number, data: Buffer, eof: boolean): Promise<void> {
    const step = this.queue.then(async () => {
      if (offset > this.written) {
        throw new GrpcError(GrpcStatus.OUT_OF_RANGE, `stdin write at offset ${offset} but only ${this.written} bytes were written`);
      }
      const fresh = data.subarray(Math.min(data.length, this.written - offset));
      if (this.closed) {
        if (fresh.length > 0) throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, "stdin is already closed");
        return;
      }
      if (fresh.length > 0) {
        this.written += fresh.length;
        await this.sink(fresh);
      }
      if (eof) {
        this.closed = true;
        await this.close();
      }
    });
    this.queue = step.catch(() => undefined);
    return step;
  }
}

const SIGNAL_NUMBERS = constants.signals as Record<string, number>;

function exitStatusOf(exit: ExecExit): ExitStatus {
  if (exit.exitCode !== null) return { code: exit.exitCode };
  return { signal: (exit.signal && SIGNAL_NUMBERS[exit.signal]) || SIGNAL_NUMBERS.SIGKILL! };
}

export const KILLED: ExitStatus = { signal: SIGNAL_NUMBERS.SIGKILL! };

/** A real command in the sandbox's jail (the backend's exec handle: output rings in the supervisor). */
export class BackendProcess implements EmulatedProcess {
  readonly exit: Promise<ExitStatus>;
  private status: ExitStatus | null = null;
  private readonly stdin: StdinCursor;
  private readonly killed = new AbortController();
  private resolveKilled!: (status: ExitStatus) => void;

  constructor(
    readonly execId: string,
    private readonly handle: ExecHandle,
  ) {
    this.stdin = new StdinCursor(
      // Stdin for a process that already exited goes nowhere, as with a pipe nobody reads.
      (data) => handle.write(data).catch(() => undefined),
      () => handle.closeStdin().catch(() => undefined),
    );
    const killed = new Promise<ExitStatus>((resolve) => (this.resolveKilled = resolve));
    this.exit = Promise.race([handle.exited.then(exitStatusOf, () => KILLED), killed]).then((status) => {
      this.status = status;
      return status;
    });
  }

  writeStdin(offset: number, data: Buffer, eof: boolean): Promise<void> {
    return this.stdin.write(offset, data, eof);
  }

  stdinStatus() {
    return { written: this.stdin.written, closed: this.stdin.closed };
  }

  read(stream: OutputStreamName, offset: number, send: (data: Buffer) => void, signal: AbortSignal): Promise<void> {
    if (this.killed.signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let subscription: OutputSubscription | undefined;
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        subscription?.close();
        signal.removeEventListener("abort", stop);
        this.killed.signal.removeEventListener("abort", stop);
        if (error) reject(error);
        else resolve();
      };
      const stop = () => finish();
      subscription = this.handle.subscribe(
        { [stream]: offset },
        {
          onData: (_stream, data) => send(data),
          // The supervisor's ring dropped bytes this reader never saw: say so rather than skip them.
          onGap: (_stream, from, to) => finish(new GrpcError(GrpcStatus.DATA_LOSS, `${stream} bytes ${from}-${to} of exec ${this.execId} are no longer buffered`)),
          onEnd: () => finish(),
        },
      );
      if (settled) subscription.close();
      subscription.done.then(
        () => finish(),
        () => finish(),
      );
      signal.addEventListener("abort", stop, { once: true });
      this.killed.signal.addEventListener("abort", stop, { once: true });
    });
  }

  exited(): ExitStatus | null {
    return this.status;
  }

  kill(): void {
    this.killed.abort();
    this.resolveKilled(KILLED);
    this.handle.close();
  }

  /** Its output so far, kept in memory: readable after the jail is gone (a finished sandbox's stdio). */
  async capture(): Promise<CapturedProcess> {
    const read = async (stream: OutputStreamName) => {
      const chunk = await this.handle.read(stream, 0, { maxBytes: 16 * 1024 * 1024 }).catch(() => undefined);
      return { base: chunk?.offset ?? 0, data: chunk?.data ?? Buffer.alloc(0) };
    };
    const [stdout, stderr] = await Promise.all([read("stdout"), read("stderr")]);
    return new CapturedProcess(this.execId, stdout, stderr, this.status ?? KILLED);
  }
}

/** A finished process's output, served from memory (its jail is gone); stdin goes nowhere. */
export class CapturedProcess implements EmulatedProcess {
  readonly exit: Promise<ExitStatus>;

  constructor(
    readonly execId: string,
    private readonly stdout: { base: number; data: Buffer },
    private readonly stderr: { base: number; data: Buffer },
    private readonly status: ExitStatus,
  ) {
    this.exit = Promise.resolve(status);
  }

  async writeStdin(): Promise<void> {}

  stdinStatus() {
    return { written: 0, closed: true };
  }

  async read(stream: OutputStreamName, offset: number, send: (data: Buffer) => void): Promise<void> {
    const kept = stream === "stdout" ? this.stdout : this.stderr;
    const from = Math.max(0, offset - kept.base);
    if (from < kept.data.length) send(kept.data.subarray(from));
  }

  exited(): ExitStatus {
    return this.status;
  }

  kill(): void {}
}

/** Bytes kept in memory for a process the emulator plays itself (the fs-tools). */
export class OutputBuffer {
  private readonly chunks: Buffer[] = [];
  private length = 0;
  private ended = false;
  private waiters = new Set<() => void>();

  push(data: Buffer | string): void {
    const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
    if (bytes.length === 0 || this.ended) return;
    this.chunks.push(bytes);
    this.length += bytes.length;
    this.wake();
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  async read(offset: number, send: (data: Buffer) => void, signal: AbortSignal): Promise<void> {
    let position = offset;
    for (;;) {
      if (position < this.length) {
        const all = Buffer.concat(this.chunks, this.length);
        send(all.subarray(position));
        position = this.length;
      }
      if (this.ended || signal.aborted) return;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          signal.removeEventListener("abort", wake);
          resolve();
        };
        this.waiters.add(wake);
        signal.addEventListener("abort", wake, { once: true });
      });
    }
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
