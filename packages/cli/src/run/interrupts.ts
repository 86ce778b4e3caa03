/**
 * SIGINT/SIGTERM handling for commands that hold a lease: the first signal aborts `signal` so the
 * command can release with `cancelActiveWork`; a second one calls `onForce` (exit now, leave the
 * lease to `leases gc`).
 */
export class Interrupts {
  readonly #controller = new AbortController();
  readonly #onForce: (signal: NodeJS.Signals) => void;
  readonly #notice: (text: string) => void;
  received: NodeJS.Signals | undefined;
  readonly #handler = (signal: NodeJS.Signals) => {
    if (this.received) {
      this.#onForce(signal);
      return;
    }
    this.received = signal;
    this.#notice(`paperclip-sandbox: ${signal} received, stopping the command and releasing the sandbox (again to force)\n`);
    this.#controller.abort(new Interrupted(signal));
  };

  constructor(options: { onForce: (signal: NodeJS.Signals) => void; notice: (text: string) => void }) {
    this.#onForce = options.onForce;
    this.#notice = options.notice;
    process.on("SIGINT", this.#handler);
    process.on("SIGTERM", this.#handler);
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Rejects with `Interrupted` as soon as a signal arrives; otherwise settles like `work`. */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.signal.aborted) return Promise.reject(this.signal.reason as Error);
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(this.signal.reason as Error);
      this.signal.addEventListener("abort", onAbort, { once: true });
      work.then(
        (value) => {
          this.signal.removeEventListener("abort", onAbort);
          resolve(value);
        },
        (error: unknown) => {
          this.signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  /** Exit code for an interrupted command: 128 + signal number. */
  exitCode(): number {
    return this.received === "SIGTERM" ? 143 : 130;
  }

  dispose(): void {
    process.off("SIGINT", this.#handler);
    process.off("SIGTERM", this.#handler);
  }
}

export class Interrupted extends Error {
  readonly signal: NodeJS.Signals;
  constructor(signal: NodeJS.Signals) {
    super(`interrupted by ${signal}`);
    this.name = "Interrupted";
    this.signal = signal;
  }
}
