import { isProviderApiError, type ProviderApiError } from "./api-error.js";
import { abortableSleep } from "./poll.js";

/** How hard to try. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 4; 1 = no retry). */
  attempts?: number;
  /** Wall-clock budget from the first attempt, in ms (default 60 s); no retry would end after it. */
  totalMs?: number;
  /** The first backoff's ceiling (default 250 ms); it doubles each retry. */
  baseDelayMs?: number;
  /** The largest backoff ceiling (default 8 s). */
  maxDelayMs?: number;
}

export interface RetryEvent {
  /** The attempt that failed, from 1. */
  attempt: number;
  error: ProviderApiError;
  /** How long we wait before the next attempt. */
  delayMs: number;
  elapsedMs: number;
}

export interface RetryOptions extends RetryPolicy {
  /** The caller's word that repeating the call is harmless; otherwise only failures that certainly did not take effect are retried. */
  idempotent: boolean;
  signal?: AbortSignal;
  /** Called before each wait (for logging; the error is already redacted). */
  onRetry?: (event: RetryEvent) => void;
  /** Injected for tests. */
  random?: () => number;
  now?: () => number;
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

/** What one attempt is told: its number and the budget left, to bound its own deadline. */
export interface AttemptInfo {
  attempt: number;
  remainingMs: number;
}

export const DEFAULT_RETRY_POLICY: Required<RetryPolicy> = Object.freeze({ attempts: 4, totalMs: 60_000, baseDelayMs: 250, maxDelayMs: 8_000 });

/** Whether this failure may be tried again: retryable, and either idempotent or certainly without effect. */
export function canRetry(error: unknown, idempotent: boolean): error is ProviderApiError {
  return isProviderApiError(error) && error.retryable && (idempotent || !error.mayHaveTakenEffect);
}

/**
 * Full-jitter exponential backoff (a uniform wait in [0, min(max, base·2^(n-1)))), or the vendor's
 * `Retry-After` when it asks for longer.
 */
export function retryDelay(failedAttempt: number, policy: RetryPolicy, random: () => number, retryAfterMs?: number): number {
  const base = policy.baseDelayMs ?? DEFAULT_RETRY_POLICY.baseDelayMs;
  const max = policy.maxDelayMs ?? DEFAULT_RETRY_POLICY.maxDelayMs;
  const ceiling = Math.min(max, base * 2 ** (failedAttempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return retryAfterMs === undefined ? jittered : Math.max(retryAfterMs, jittered);
}

/**
 * Runs `attempt` until it succeeds, fails in a way that must not be retried, or the budget
 * (attempts, total time, signal) is spent; then throws the last error, noting the attempts made.
 * Only `ProviderApiError`s are retried; anything else is a bug and is thrown at once.
 */
export async function withRetry<T>(attempt: (info: AttemptInfo) => Promise<T>, options: RetryOptions): Promise<T> {
  const attempts = positiveInteger("attempts", options.attempts ?? DEFAULT_RETRY_POLICY.attempts);
  const totalMs = positiveNumber("totalMs", options.totalMs ?? DEFAULT_RETRY_POLICY.totalMs);
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const sleep = options.sleep ?? abortableSleep;
  const started = now();
  for (let n = 1; ; n += 1) {
    let error: unknown;
    try {
      return await attempt({ attempt: n, remainingMs: Math.max(1, totalMs - (now() - started)) });
    } catch (caught) {
      error = caught;
    }
    if (!canRetry(error, options.idempotent)) throw noteAttempts(error, n);
    const elapsedMs = now() - started;
    const delayMs = retryDelay(n, options, random, error.retryAfterMs);
    if (n >= attempts || elapsedMs + delayMs >= totalMs || options.signal?.aborted) throw noteAttempts(error, n);
    options.onRetry?.({ attempt: n, error, delayMs, elapsedMs });
    try {
      await sleep(delayMs, options.signal);
    } catch {
      throw error.with({ code: "aborted", retryable: false, detail: `cancelled while waiting to retry after: ${error.detail}`, attempts: n });
    }
  }
}

function noteAttempts(error: unknown, attempts: number): unknown {
  return isProviderApiError(error) && attempts > 1 ? error.with({ attempts }) : error;
}

function positiveInteger(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`retry.${field}: expected a positive integer, got ${value}`);
  return value;
}

function positiveNumber(field: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) throw new RangeError(`retry.${field}: expected a positive number of milliseconds, got ${value}`);
  return value;
}
