import { ConnectError } from "./codes.js";

/** Parses `Connect-Timeout-Ms` (1–10 digits) into a timeout, or answers invalid_argument. */
export function parseConnectTimeout(header: string | undefined): number | undefined {
  if (header === undefined || header === "") return undefined;
  if (!/^\d{1,10}$/.test(header)) {
    throw new ConnectError("invalid_argument", `Connect-Timeout-Ms: must be 1 to 10 digits (got ${JSON.stringify(header)})`);
  }
  return Number(header);
}

export interface Deadline {
  /** Epoch ms at which the call's deadline passes, or undefined without one. */
  readonly at: number | undefined;
  readonly timeoutMs: number | undefined;
  /** Aborts at the deadline (reason: a deadline_exceeded ConnectError) or when `parent` aborts. */
  readonly signal: AbortSignal;
  readonly expired: boolean;
  dispose(): void;
}

export function startDeadline(timeoutMs: number | undefined, parent: AbortSignal, now: () => number = Date.now): Deadline {
  const controller = new AbortController();
  const onParent = () => controller.abort(parent.reason);
  if (parent.aborted) onParent();
  else parent.addEventListener("abort", onParent, { once: true });
  let expired = false;
  const timer =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          expired = true;
          controller.abort(new ConnectError("deadline_exceeded", `deadline of ${timeoutMs} ms exceeded`));
        }, timeoutMs);
  return {
    at: timeoutMs === undefined ? undefined : now() + timeoutMs,
    timeoutMs,
    signal: controller.signal,
    get expired() {
      return expired;
    },
    dispose() {
      if (timer) clearTimeout(timer);
      parent.removeEventListener("abort", onParent);
    },
  };
}
