import type { SyncStrategy } from "../sync/sync-for.js";
import type { FileTransport } from "../transport.js";
import type { SandboxHandle } from "./types.js";

/** One lease this worker is serving: its handle, transports, and in-flight work. */
export interface LeaseEntry<H extends SandboxHandle, C> {
  readonly providerLeaseId: string;
  handle: H;
  /** The config of the latest hook for this lease (duplex opens, which carry none, use it). */
  config: C;
  metadata: Record<string, unknown>;
  /** The lease's workspace (absolute), once known. */
  workspace: string | undefined;
  /** The vendor file API, made once per entry. */
  files: FileTransport | undefined;
  /** The lease's sync strategy, made on its first sync (it remembers what it left in the sandbox). */
  sync: SyncStrategy | undefined;
  /** Executes, syncs and duplex commands running now, so release can drain or cancel them (and keepalive sees the lease in use). */
  readonly work: Set<Promise<unknown>>;
  /** When the last of its work ended (epoch ms). */
  lastActive: number;
  /** Aborted by a cancelling release or destroy: every command of the lease ends. */
  readonly abort: AbortController;
}

/**
 * The leases one worker holds. Hooks for one lease share one entry; a lease the worker does not
 * hold yet (a fresh worker after a restart) is looked up once, however many hooks ask at the same
 * time. Duplex opens, which carry no config, are served only from here.
 */
export interface LeaseRegistryEvents<H extends SandboxHandle, C> {
  /** An entry is now the one served for its lease (new, or replacing another). */
  held?(entry: LeaseEntry<H, C>): void;
  /** The lease is no longer served by this worker. */
  released?(providerLeaseId: string): void;
}

export class LeaseRegistry<H extends SandboxHandle, C> {
  private readonly entries = new Map<string, LeaseEntry<H, C>>();
  private readonly pending = new Map<string, Promise<LeaseEntry<H, C>>>();

  constructor(private readonly events: LeaseRegistryEvents<H, C> = {}) {}

  held(providerLeaseId: string): LeaseEntry<H, C> | undefined {
    return this.entries.get(providerLeaseId);
  }

  /** The entry, creating it with `load` (once, even for concurrent callers) when absent. */
  async obtain(providerLeaseId: string, load: () => Promise<LeaseEntry<H, C>>): Promise<LeaseEntry<H, C>> {
    const known = this.entries.get(providerLeaseId);
    if (known) return known;
    let loading = this.pending.get(providerLeaseId);
    if (!loading) {
      loading = load()
        .then((entry) => {
          this.entries.set(providerLeaseId, entry);
          this.events.held?.(entry);
          return entry;
        })
        .finally(() => this.pending.delete(providerLeaseId));
      this.pending.set(providerLeaseId, loading);
    }
    return loading;
  }

  set(entry: LeaseEntry<H, C>): void {
    const previous = this.entries.get(entry.providerLeaseId);
    // Work tracked on an entry being replaced (e.g. after a restart of the sandbox) stays cancellable.
    if (previous && previous !== entry) for (const work of previous.work) entry.work.add(work);
    this.entries.set(entry.providerLeaseId, entry);
    this.events.held?.(entry);
  }

  forget(providerLeaseId: string): LeaseEntry<H, C> | undefined {
    const entry = this.entries.get(providerLeaseId);
    this.entries.delete(providerLeaseId);
    this.events.released?.(providerLeaseId);
    return entry;
  }

  all(): LeaseEntry<H, C>[] {
    return [...this.entries.values()];
  }

  /** Tracks a unit of work so release can drain or cancel it; its end counts as the lease's last activity. */
  track<T>(entry: LeaseEntry<H, C>, work: Promise<T>): Promise<T> {
    entry.work.add(work);
    void work
      .finally(() => {
        entry.work.delete(work);
        entry.lastActive = Date.now();
      })
      .catch(() => undefined);
    return work;
  }

  /** Ends the lease's in-flight work and waits (at most `deadlineMs`) until it has settled. */
  async cancel(entry: LeaseEntry<H, C>, deadlineMs: number): Promise<void> {
    entry.abort.abort();
    if (entry.work.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...entry.work]), new Promise((resolve) => (timer = setTimeout(resolve, deadlineMs)))]);
    clearTimeout(timer);
  }

  /**
   * Waits for the lease's in-flight work for at most `deadlineMs`, then ends it like a cancelling
   * release (a sandbox that stopped answering must not hold a release forever). True when it drained.
   */
  async drain(entry: LeaseEntry<H, C>, deadlineMs: number): Promise<boolean> {
    if (entry.work.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      Promise.allSettled([...entry.work]).then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), deadlineMs);
      }),
    ]);
    clearTimeout(timer);
    if (!drained) await this.cancel(entry, deadlineMs);
    return drained;
  }
}
