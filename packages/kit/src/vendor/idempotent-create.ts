import { randomBytes } from "node:crypto";
import { isProviderApiError } from "./api-error.js";
import { retryDelay } from "./retry.js";

export interface IdempotentCreateOptions<T> {
  /** Makes the resource tagged with `nonce` (a label, tag or name that only this create carries). */
  create(nonce: string): Promise<T>;
  /** The resource tagged with `nonce`, when the vendor has one (a create whose answer was lost). */
  find(nonce: string): Promise<T | undefined>;
  /** Turns what `create` throws into a `ProviderApiError` (an SDK's own errors, say); default as is. */
  toError?(error: unknown): unknown;
  signal?: AbortSignal;
  /** Injected for tests. */
  random?: () => number;
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

/**
 * A vendor create (a non-idempotent POST) tried at most twice without ever making two resources:
 * - a failure that is not retryable is thrown;
 * - one that certainly did not take effect (429, a refused connection) is simply tried again;
 * - one that may have (503, an answer lost mid-way) is first looked for by its nonce, and the
 *   resource is used when it is there; when the look-up itself fails the first error is thrown
 *   (the lifecycle layer's clean-up then looks again by the run's labels).
 */
export async function createIdempotently<T>(options: IdempotentCreateOptions<T>): Promise<T> {
  const nonce = randomBytes(12).toString("hex");
  const attempt = async () => {
    try {
      return await options.create(nonce);
    } catch (error) {
      throw options.toError ? options.toError(error) : error;
    }
  };
  try {
    return await attempt();
  } catch (error) {
    if (!isProviderApiError(error) || !error.retryable || options.signal?.aborted) throw error;
    if (error.mayHaveTakenEffect) {
      let found: T | undefined;
      try {
        found = await options.find(nonce);
      } catch {
        throw error;
      }
      if (found !== undefined) return found;
    }
    const wait = retryDelay(1, {}, options.random ?? Math.random, error.retryAfterMs);
    await (options.sleep ?? sleep)(wait, options.signal);
    try {
      return await attempt();
    } catch (again) {
      throw isProviderApiError(again) ? again.with({ attempts: 2 }) : again;
    }
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}
