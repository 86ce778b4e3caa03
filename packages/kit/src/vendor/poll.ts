/**
 * Waiting for a vendor's state to change (a build to end, a machine to settle, a snapshot to be
 * saved) by reading it again and again: one loop for every provider, with a growing pause, an abort
 * signal, an optional deadline reported as a {@link PollTimeoutError} that names what was awaited,
 * and an injected clock for tests.
 */

/** The clock a wait reads and pauses on; injected in tests (defaults: `Date.now` and a timer that the signal cancels). */
export interface PollClock {
  now?: () => number;
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

export interface PollOptions<T> extends PollClock {
  /** What is awaited, for the timeout error: "coder workspace w to be ready". */
  what: string;
  /** Give up after this long (ms from the first read, on `now`). Absent: wait until `signal` aborts. */
  timeoutMs?: number;
  /** The pause after the first read that was not done (default 100 ms). */
  intervalMs?: number;
  /** The longest pause (default 2 s). */
  maxIntervalMs?: number;
  /** Each pause is the last one times this, up to `maxIntervalMs` (default 2). */
  factor?: number;
  /** Ends the wait (the pending pause rejects with the signal's reason). */
  signal?: AbortSignal;
  /** Says where the last read stood, for the timeout error: "it is starting". */
  describe?: (last: T) => string;
}

/** The deadline passed before what was awaited happened. */
export class PollTimeoutError extends Error {
  override name = "PollTimeoutError";
  readonly code = "timeout";
  constructor(
    /** What was awaited (`PollOptions.what`). */
    readonly what: string,
    readonly timeoutMs: number,
    /** Where the last read stood (`PollOptions.describe`), when known. */
    readonly last?: string,
  ) {
    super(`timed out after ${formatMs(timeoutMs)} waiting for ${what}${last === undefined ? "" : ` (${last})`}`);
  }
}

export function isPollTimeoutError(error: unknown): error is PollTimeoutError {
  return error instanceof PollTimeoutError;
}

/**
 * Reads with `read` until `done` holds for what it returned, and returns that. Between reads it
 * pauses `intervalMs`, growing by `factor` up to `maxIntervalMs`; a read that fails ends the wait
 * with its error (retrying a read is the vendor call's job). With `timeoutMs`, no pause reaches past
 * the deadline: when the next read would start after it, the wait ends with a PollTimeoutError.
 */
export async function pollUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, options: PollOptions<T>): Promise<T> {
  const first = positive("intervalMs", options.intervalMs ?? 100);
  const max = Math.max(first, positive("maxIntervalMs", options.maxIntervalMs ?? 2_000));
  const factor = options.factor ?? 2;
  if (!(Number.isFinite(factor) && factor >= 1)) throw new RangeError(`poll factor: expected a number >= 1, got ${factor}`);
  if (options.timeoutMs !== undefined) positive("timeoutMs", options.timeoutMs);
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? abortableSleep;
  const started = now();
  for (let pause = first; ; pause = Math.min(max, Math.ceil(pause * factor))) {
    options.signal?.throwIfAborted();
    const value = await read();
    if (done(value)) return value;
    if (options.timeoutMs !== undefined && now() - started + pause > options.timeoutMs) {
      throw new PollTimeoutError(options.what, options.timeoutMs, options.describe?.(value));
    }
    await sleep(pause, options.signal);
  }
}

/** A pause that the signal ends early, rejecting with its reason. */
export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function positive(field: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) throw new RangeError(`poll ${field}: expected a positive number of milliseconds, got ${value}`);
  return value;
}

function formatMs(ms: number): string {
  return ms >= 1_000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`;
}
