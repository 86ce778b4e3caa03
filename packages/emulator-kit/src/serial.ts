/**
 * Per-key serialisation: the state changes of one sandbox run one at a time, in call order; other
 * sandboxes' run alongside. A failed step does not block the next one.
 */
export interface Serial {
  /** Runs `work` once every earlier piece of work for `key` has settled. */
  <T>(key: string, work: () => Promise<T> | T): Promise<T>;
  /** True while work for `key` runs or waits (a vendor that refuses concurrent changes answers 409 then). */
  busy(key: string): boolean;
  /** Resolves once nothing runs for any key. */
  idle(): Promise<void>;
}

export function createSerial(): Serial {
  const tails = new Map<string, Promise<unknown>>();
  const queued = new Map<string, number>();
  const serial = (<T>(key: string, work: () => Promise<T> | T): Promise<T> => {
    queued.set(key, (queued.get(key) ?? 0) + 1);
    // Counted down before the caller's await resumes, so `busy` is exact from the caller's view.
    const run = async () => {
      try {
        return await work();
      } finally {
        const left = (queued.get(key) ?? 1) - 1;
        if (left === 0) queued.delete(key);
        else queued.set(key, left);
      }
    };
    const previous = tails.get(key) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.then(
      () => undefined,
      () => undefined,
    );
    tails.set(key, settled);
    void settled.then(() => {
      if (tails.get(key) === settled) tails.delete(key);
    });
    return next;
  }) as Serial;
  serial.busy = (key) => queued.has(key);
  serial.idle = async () => {
    while (tails.size > 0) await Promise.all([...tails.values()]);
  };
  return serial;
}
