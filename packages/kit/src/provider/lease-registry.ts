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
  /** The vendor file API, made once per entry (sync-out stages are tracked per transport). */
  files: FileTransport | undefined;
  /** Executes and syncs running now, so release can drain or cancel them. */
  readonly work: Set<Promise<unknown>>;
  /** Aborted by a cancelling release or destroy: every command of the lease ends. */
  readonly abort: AbortController;
  /** A file-API sync-out left archive stages in the sandbox (removed before a kept lease stops). */
  downloadStages: boolean;
}

/**
 * The leases one worker holds. Hooks for one lease share one entry; a lease the worker does not
 * hold yet (a fresh worker after a restart) is looked up once, however many hooks ask at the same
 * time. Duplex opens, which carry no config, are served only from here.
 */
export class LeaseRegistry<H extends SandboxHandle, C> {
  private readonly entries = new Map<string, LeaseEntry<H, C>>();
  private readonly pending = new Map<string, Promise<LeaseEntry<H, C>>>();

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
  }

  forget(providerLeaseId: string): LeaseEntry<H, C> | undefined {
    const entry = this.entries.get(providerLeaseId);
    this.entries.delete(providerLeaseId);
    return entry;
  }

  all(): LeaseEntry<H, C>[] {
    return [...this.entries.values()];
  }

  /** Tracks a unit of work so release can drain or cancel it. */
  track<T>(entry: LeaseEntry<H, C>, work: Promise<T>): Promise<T> {
    entry.work.add(work);
    void work.finally(() => entry.work.delete(work)).catch(() => undefined);
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
