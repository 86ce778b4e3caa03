/** Wall-clock durations of a run's phases, in the order they ran. */
export class PhaseTimer {
  readonly phases: { name: string; ms: number; ok: boolean }[] = [];
  readonly #start = performance.now();

  async time<T>(name: string, work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    try {
      const value = await work();
      this.phases.push({ name, ms: performance.now() - start, ok: true });
      return value;
    } catch (error) {
      this.phases.push({ name, ms: performance.now() - start, ok: false });
      throw error;
    }
  }

  record(name: string, ms: number): void {
    this.phases.push({ name, ms, ok: true });
  }

  totalMs(): number {
    return performance.now() - this.#start;
  }

  format(): string {
    const width = Math.max(5, ...this.phases.map((p) => p.name.length));
    const lines = this.phases.map((p) => `  ${p.name.padEnd(width)}  ${formatMs(p.ms).padStart(9)}${p.ok ? "" : "  (failed)"}`);
    lines.push(`  ${"total".padEnd(width)}  ${formatMs(this.totalMs()).padStart(9)}`);
    return `timings:\n${lines.join("\n")}\n`;
  }
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${Math.round(bytes)} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
