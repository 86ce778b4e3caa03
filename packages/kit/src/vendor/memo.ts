/** A value made once and shared by every caller, also concurrent ones; a rejection is forgotten, so the next call tries again. */
export interface AsyncMemo<V> {
  (): Promise<V>;
  /** Forgets the value (e.g. a session that ended with its sandbox): the next call makes a new one. */
  forget(): void;
}

export function memoAsync<V>(make: () => Promise<V>): AsyncMemo<V> {
  let pending: Promise<V> | undefined;
  const get = (() => {
    if (pending) return pending;
    const made = make();
    pending = made;
    made.catch(() => {
      if (pending === made) pending = undefined;
    });
    return made;
  }) as AsyncMemo<V>;
  get.forget = () => void (pending = undefined);
  return get;
}

/** `memoAsync` per key: one value per key, each made once; a rejection is forgotten. */
export interface AsyncMemoByKey<V> {
  get(key: string, make: () => Promise<V>): Promise<V>;
  forget(key: string): void;
  /** The values made or being made. */
  values(): Promise<V>[];
  clear(): void;
}

export function memoAsyncByKey<V>(): AsyncMemoByKey<V> {
  const pending = new Map<string, Promise<V>>();
  return {
    get(key, make) {
      const known = pending.get(key);
      if (known) return known;
      const made = make();
      pending.set(key, made);
      made.catch(() => {
        if (pending.get(key) === made) pending.delete(key);
      });
      return made;
    },
    forget: (key) => void pending.delete(key),
    values: () => [...pending.values()],
    clear: () => pending.clear(),
  };
}
