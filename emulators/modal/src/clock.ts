/**
 * Modal's own clocks (sandbox timeout, idle timeout, snapshot image TTL) run on this clock, so tests
 * can compress them: with `scale: 0.01` a 300 s sandbox timeout ends the sandbox after 3 s. Exec
 * timeouts and long-poll waits stay in real time (the SDK keeps real-time deadlines for them).
 */
export interface VendorClock {
  /** Real milliseconds that `vendorMs` of Modal time take. */
  realMs(vendorMs: number): number;
  /** Runs `fn` after `vendorMs` of Modal time; returns a cancel function. */
  after(vendorMs: number, fn: () => void): () => void;
}

export function createVendorClock(scale: number): VendorClock {
  const realMs = (vendorMs: number) => Math.max(0, Math.round(vendorMs * scale));
  return {
    realMs,
    after(vendorMs, fn) {
      // setTimeout holds at most 2^31-1 ms; longer waits re-arm.
      const MAX = 2_147_483_647;
      let remaining = realMs(vendorMs);
      let timer: NodeJS.Timeout | undefined;
      const arm = () => {
        const step = Math.min(remaining, MAX);
        remaining -= step;
        timer = setTimeout(() => (remaining > 0 ? arm() : fn()), step);
        timer.unref();
      };
      arm();
      return () => clearTimeout(timer);
    },
  };
}
