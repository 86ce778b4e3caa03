import { ProcessGroupSet } from "@paperclip-sandbox/kit";

/** Live work of one lease in this worker: the process groups it started and its running calls. */
export class LeaseActivity {
  readonly groups = new ProcessGroupSet();
  private readonly controller = new AbortController();
  private readonly running = new Set<Promise<unknown>>();

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    void work.finally(() => this.running.delete(work)).catch(() => undefined);
    return work;
  }

  /** Stops running calls and every process group, resolving only once all of them are gone. */
  async end(killGraceMs?: number): Promise<void> {
    this.controller.abort();
    await Promise.allSettled([...this.running]);
    await this.groups.endAll(killGraceMs);
  }
}
