/** One AbortSignal for a call: fires on the per-call deadline or when the caller's signal does. */
export interface CallDeadline {
  signal: AbortSignal;
  /** Which fired first. */
  readonly timedOut: boolean;
  readonly aborted: boolean;
  /** Stops the timer and detaches from the caller's signal; call when the exchange is over. */
  clear(): void;
}

export function startDeadline(timeoutMs: number, outer: AbortSignal | undefined): CallDeadline {
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) throw new RangeError(`timeoutMs: expected a positive number of milliseconds, got ${timeoutMs}`);
  const controller = new AbortController();
  let fired: "timeout" | "aborted" | undefined;
  const fire = (why: "timeout" | "aborted") => {
    if (fired) return;
    fired = why;
    controller.abort(new Error(why === "timeout" ? `deadline of ${timeoutMs} ms passed` : "cancelled by the caller"));
  };
  const onAbort = () => fire("aborted");
  const timer = setTimeout(() => fire("timeout"), timeoutMs);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  return {
    signal: controller.signal,
    get timedOut() {
      return fired === "timeout";
    },
    get aborted() {
      return fired === "aborted";
    },
    clear() {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    },
  };
}
