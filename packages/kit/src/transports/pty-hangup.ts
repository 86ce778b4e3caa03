import type { PtySignal } from "../transport.js";

const PTY_SIGNALS: readonly PtySignal[] = ["SIGINT", "SIGTERM", "SIGKILL", "SIGHUP"];

/** The signals a terminal's `kill` takes; anything else is refused before any vendor call. */
export function checkPtySignal(signal: PtySignal): PtySignal {
  if (!PTY_SIGNALS.includes(signal)) throw new RangeError(`PTY signal must be one of ${PTY_SIGNALS.join(", ")}`);
  return signal;
}

/**
 * Closing a terminal as one that goes away: SIGHUP to the program's group, then, if it has not ended
 * within `graceMs`, the transport's harder end (`forceEnd`: SIGKILL, the vendor's session delete).
 * Resolves true when the program ended within the grace, false when `forceEnd` was needed.
 */
export async function hangUpPty(options: { exited: Promise<unknown>; signalGroup: (signal: PtySignal) => Promise<void>; forceEnd: () => Promise<void>; graceMs: number }): Promise<boolean> {
  await options.signalGroup("SIGHUP").catch(() => undefined);
  if (await endsWithin(options.exited, options.graceMs)) return true;
  await options.forceEnd();
  return false;
}

/** Whether `exited` settles within `ms`. */
export function endsWithin(exited: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(resolve, ms, false).unref())]);
}
