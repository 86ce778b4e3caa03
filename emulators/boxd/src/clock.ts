/**
 * boxd's own clocks (the delete timer, auto-suspend, auto-hibernate) run on this clock, so tests can
 * compress them: with `scale: 0.001` a 15-minute delete timer fires after 0.9 s. Commands and token
 * lifetimes stay in real time.
 */
export interface VendorClock {
  /** Real milliseconds that `vendorMs` of boxd time take. */
  realMs(vendorMs: number): number;
  /** Runs `fn` after `vendorMs` of boxd time; returns a cancel function. */
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
