import { withRetry, type AttemptInfo, type RetryEvent, type RetryPolicy } from "./retry.js";

/** One vendor's way of calling its SDK: how a failure reads, and how hard to try. */
export interface VendorCallSpec<Context> {
  /**
   * The SDK's failure as a `ProviderApiError` (pass one through; hand anything without a response
   * to `apiErrorFromFailure`, the one network classifier). Anything else is thrown at once (a bug).
   */
  translate(error: unknown, operation: string, context: Context): unknown;
  /** The default budget of every call (`withRetry`'s defaults otherwise). */
  retry?: RetryPolicy;
  /** Before each wait, e.g. to log it (the error is already translated). */
  onRetry?(operation: string, event: RetryEvent): void;
  /** Injected for tests: the backoff's randomness and its waits. */
  random?: () => number;
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

export interface VendorCallOptions extends RetryPolicy {
  /** Repeating the call is harmless; otherwise only a failure that certainly had no effect is retried. */
  idempotent: boolean;
  signal?: AbortSignal;
}

/** `call(operation, fn, {idempotent, ...context})`: `fn` once per attempt, its failure translated, retried as allowed. */
export type VendorCall<Context = object> = <T>(operation: string, fn: (attempt: AttemptInfo) => Promise<T>, options: VendorCallOptions & Context) => Promise<T>;

/**
 * The one wrapper for "call the SDK, translate the error, retry" (envd, daytona, kubernetes,
 * modal and the HTTP client all go through it). Per-call options override the spec's budget;
 * the rest of them is the translator's context (e.g. which statuses mean "not processed").
 */
export function createVendorCall<Context = object>(spec: VendorCallSpec<Context>): VendorCall<Context> {
  return (operation, fn, options) => {
    const { idempotent, signal, attempts, totalMs, baseDelayMs, maxDelayMs } = options;
    const override: RetryPolicy = Object.fromEntries(Object.entries({ attempts, totalMs, baseDelayMs, maxDelayMs }).filter(([, value]) => value !== undefined));
    return withRetry(
      async (attempt) => {
        try {
          return await fn(attempt);
        } catch (error) {
          throw spec.translate(error, operation, options);
        }
      },
      {
        ...spec.retry,
        ...override,
        idempotent,
        ...(signal ? { signal } : {}),
        ...(spec.random ? { random: spec.random } : {}),
        ...(spec.sleep ? { sleep: spec.sleep } : {}),
        ...(spec.onRetry ? { onRetry: (event: RetryEvent) => spec.onRetry!(operation, event) } : {}),
      },
    );
  };
}
