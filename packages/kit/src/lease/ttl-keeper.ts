/**
 * Keeping a vendor-side sandbox timeout (an idle TTL: E2B's `timeout`, an auto-stop interval) alive
 * while a lease is held, without running past the lease's hard deadline. Nothing here is called per
 * execute: a held lease refreshes on a timer, so a plain execute stays one vendor call.
 */

/** Seconds-granular vendors (E2B: `timeout` in seconds, rounded up by the SDK) need whole seconds. */
export const SECOND_MS = 1000;

/**
 * The TTL to ask for now: `ttlMs`, or less so that it ends at or before `capAt` (epoch ms). A vendor
 * counts a relative TTL from when the request reaches it, so near the cap `marginMs` (default one
 * granule) is kept for the request's latency, and the result is rounded DOWN to the vendor's
 * granularity (a seconds-granular vendor rounding up would otherwise overshoot the cap). Zero when
 * no whole granule fits before the cap: the sandbox cannot be given any more time.
 */
export function cappedTtlMs(ttlMs: number, capAt: number | null | undefined, options: { granularityMs?: number; marginMs?: number; now?: number } = {}): number {
  const granularity = options.granularityMs ?? 1;
  const margin = options.marginMs ?? granularity;
  const now = options.now ?? Date.now();
  const wanted = capAt === null || capAt === undefined ? ttlMs : Math.min(ttlMs, capAt - now - margin);
  if (!(wanted > 0)) return 0;
  return Math.floor(wanted / granularity) * granularity;
}

export interface TtlKeeperOptions {
  /** The vendor TTL to keep (ms): each refresh asks for this much from now, capped by `capAt`. */
  ttlMs: number;
  /** Never keep the sandbox past this (epoch ms), e.g. the host's `requestedExpiresAt`; null for no cap. */
  capAt: number | null;
  /** Sets the vendor TTL to `ms` from now (E2B `setTimeout`). */
  refresh(ms: number): Promise<void>;
  /** Refresh interval; default a third of `ttlMs` (at least 250 ms), so two refreshes can fail before the TTL runs out. */
  everyMs?: number;
  /** Round refreshes down to this (default 1 s). */
  granularityMs?: number;
  /** Whether the lease is in use; an idle one is not refreshed (its TTL then runs out), default always. */
  active?(): boolean;
  /** A failed refresh (it is tried again at the next interval). */
  onError?(error: unknown): void;
  now?: () => number;
}

export interface TtlKeeper {
  /** Stops refreshing (the lease was released, stopped or destroyed). Idempotent. */
  stop(): void;
  readonly stopped: boolean;
}

/**
 * Refreshes the vendor TTL every `everyMs` until stopped or until the cap is less than one granule
 * away (the last refresh already ends the sandbox at or before the cap). Timers never keep the worker
 * process alive.
 */
export function keepTtlAlive(options: TtlKeeperOptions): TtlKeeper {
  const granularityMs = options.granularityMs ?? SECOND_MS;
  if (!(options.ttlMs >= granularityMs)) throw new TypeError(`ttlMs: must be at least ${granularityMs} (got ${options.ttlMs})`);
  const everyMs = options.everyMs ?? Math.max(250, Math.floor(options.ttlMs / 3));
  if (!(everyMs > 0)) throw new TypeError(`everyMs: must be positive (got ${everyMs})`);
  const now = options.now ?? Date.now;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(tick, everyMs);
    timer.unref();
  };
  const tick = () => {
    timer = undefined;
    if (stopped) return;
    const ms = cappedTtlMs(options.ttlMs, options.capAt, { granularityMs, now: now() });
    if (ms <= 0) {
      stopped = true;
      return;
    }
    if (options.active && !options.active()) return schedule();
    options.refresh(ms).then(schedule, (error: unknown) => {
      options.onError?.(error);
      schedule();
    });
  };
  schedule();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
    get stopped() {
      return stopped;
    },
  };
}

/** One keeper per lease id: (re)start when a lease is held, stop when it is let go. */
export interface TtlKeepers {
  keep(id: string, options: TtlKeeperOptions): void;
  stop(id: string): void;
  has(id: string): boolean;
  stopAll(): void;
}

export function createTtlKeepers(): TtlKeepers {
  const keepers = new Map<string, TtlKeeper>();
  return {
    keep(id, options) {
      keepers.get(id)?.stop();
      keepers.set(id, keepTtlAlive(options));
    },
    stop(id) {
      keepers.get(id)?.stop();
      keepers.delete(id);
    },
    has: (id) => keepers.get(id)?.stopped === false,
    stopAll() {
      for (const keeper of keepers.values()) keeper.stop();
      keepers.clear();
    },
  };
}
