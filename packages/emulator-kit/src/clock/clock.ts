/**
 * The vendor's clock: every emulator runs its vendor's durations (sandbox timeouts, idle timeouts,
 * auto-stop intervals, TTLs) on one, so tests can compress them or drive them by hand.
 *
 * One meaning of `timeScale` everywhere: **vendor milliseconds that pass per real millisecond**.
 * 1 is real time; 100 makes a vendor's 300 s timeout end after 3 real seconds. Instants stay on one
 * time line, `now()`: real time for {@link createVendorClock} (what SDKs compare timestamps with),
 * the test's own for {@link createManualClock}. A vendor duration lasts `duration(ms)` on it.
 */
export interface VendorClock {
  /** Vendor milliseconds per real millisecond (1: real time; 100: 100x faster). */
  readonly timeScale: number;
  /** The current instant, epoch ms, on the clock's time line. */
  now(): number;
  /** How long a vendor duration of `vendorMs` lasts on the time line (`vendorMs / timeScale`, rounded). */
  duration(vendorMs: number): number;
  /** Runs `fn` once `now()` reaches `when`; returns a cancel function. */
  at(when: number, fn: () => void): () => void;
  /** Runs `fn` after a vendor duration of `vendorMs`; returns a cancel function. */
  after(vendorMs: number, fn: () => void): () => void;
  /** Resolves after a vendor duration of `vendorMs`, or early (without rejecting) when `signal` aborts. */
  sleep(vendorMs: number, signal?: AbortSignal): Promise<void>;
  /**
   * A real epoch instant by which `when` has surely passed: for deadlines kept outside the
   * emulator (a jail's expiry, its backstop when the emulator dies). Never earlier than real now.
   */
  realDeadline(when: number): number;
}

/** A clock a test moves by hand: timers fire only in {@link ManualClock.advance}. */
export interface ManualClock extends VendorClock {
  /** Moves time forward by `ms` (time-line ms), firing due timers in order; waits for their work. */
  advance(ms: number): Promise<void>;
  /** Moves time forward to `when` (never back). */
  advanceTo(when: number): Promise<void>;
  /** Timers still armed. */
  pending(): number;
}

/** setTimeout's longest delay; longer waits re-arm. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface VendorClockOptions {
  /** Vendor ms per real ms (default 1). */
  timeScale?: number;
}

/** Checks a `timeScale` option, naming the option and the rule. */
export function checkTimeScale(value: unknown, name = "timeScale"): number {
  if (value === undefined) return 1;
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
    throw new TypeError(`${name}: must be a positive number of vendor milliseconds per real millisecond (got ${String(value)})`);
  }
  return value;
}

const durationOf = (timeScale: number) => (vendorMs: number) => Math.max(0, Math.round(vendorMs / timeScale));

/** Real time, with vendor durations compressed by `timeScale`. Timers are unref'd. */
export function createVendorClock(options: VendorClockOptions = {}): VendorClock {
  const timeScale = checkTimeScale(options.timeScale);
  const duration = durationOf(timeScale);
  const at = (when: number, fn: () => void) => {
    let timer: NodeJS.Timeout | undefined;
    let cancelled = false;
    const arm = () => {
      if (cancelled) return;
      const wait = when - Date.now();
      if (wait <= 0) return fn();
      timer = setTimeout(arm, Math.min(wait, MAX_TIMER_MS));
      timer.unref();
    };
    timer = setTimeout(arm, Math.max(0, Math.min(when - Date.now(), MAX_TIMER_MS)));
    timer.unref();
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  };
  const clock: VendorClock = {
    timeScale,
    now: () => Date.now(),
    duration,
    at,
    after: (vendorMs, fn) => at(Date.now() + duration(vendorMs), fn),
    sleep: (vendorMs, signal) => sleepOn(clock, vendorMs, signal),
    realDeadline: (when) => Math.max(Date.now(), when),
  };
  return clock;
}

/**
 * A clock for tests: time stands still until the test calls `advance`, which fires every timer
 * that falls due (in order) and waits for the work they start. Starts at `start` (default real now).
 */
export function createManualClock(options: VendorClockOptions & { start?: number } = {}): ManualClock {
  const timeScale = checkTimeScale(options.timeScale);
  const duration = durationOf(timeScale);
  let current = options.start ?? Date.now();
  let nextId = 0;
  const timers = new Map<number, { when: number; fn: () => void }>();
  const at = (when: number, fn: () => void) => {
    const id = nextId++;
    timers.set(id, { when, fn });
    return () => void timers.delete(id);
  };
  const advanceTo = async (target: number) => {
    for (;;) {
      let due: [number, { when: number; fn: () => void }] | undefined;
      for (const entry of timers) if (entry[1].when <= target && (!due || entry[1].when < due[1].when)) due = entry;
      if (!due) break;
      timers.delete(due[0]);
      current = Math.max(current, due[1].when);
      due[1].fn();
      // Let the work the timer started (promises, follow-up timers) run before the next one.
      await new Promise((resolve) => setImmediate(resolve));
    }
    current = Math.max(current, target);
    await new Promise((resolve) => setImmediate(resolve));
  };
  const clock: ManualClock = {
    timeScale,
    now: () => current,
    duration,
    at,
    after: (vendorMs, fn) => at(current + duration(vendorMs), fn),
    sleep: (vendorMs, signal) => sleepOn(clock, vendorMs, signal),
    // Real time does not follow a manual clock: the time left on it, from real now, is the backstop.
    realDeadline: (when) => Date.now() + Math.max(0, when - current),
    advance: (ms) => advanceTo(current + ms),
    advanceTo,
    pending: () => timers.size,
  };
  return clock;
}

function sleepOn(clock: VendorClock, vendorMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const cancel = clock.after(vendorMs, done);
    function done() {
      cancel();
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
