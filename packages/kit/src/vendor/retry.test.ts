import { describe, expect, it } from "vitest";
import { canRetry, isProviderApiError, parseRetryAfter, ProviderApiError, retryDelay, withRetry, type ProviderApiErrorInit } from "./index.js";

const apiError = (over: Partial<ProviderApiErrorInit> = {}) =>
  new ProviderApiError({ vendor: "v", operation: "op", status: 503, code: "http_503", detail: "busy", retryable: true, gone: false, mayHaveTakenEffect: true, ...over });

describe("parseRetryAfter", () => {
  const now = Date.parse("2026-03-01T12:00:00Z");
  it("reads delay-seconds and HTTP-dates, and ignores anything else", () => {
    expect(parseRetryAfter("0", now)).toBe(0);
    expect(parseRetryAfter(" 120 ", now)).toBe(120_000);
    expect(parseRetryAfter("Sun, 01 Mar 2026 12:00:05 GMT", now)).toBe(5_000);
    expect(parseRetryAfter("Sun, 01 Mar 2026 11:00:00 GMT", now)).toBe(0);
    for (const bad of ["", "-1", "1.5", "soon", null, undefined]) expect(parseRetryAfter(bad, now), String(bad)).toBeUndefined();
  });
});

describe("retryDelay (full jitter)", () => {
  it("waits uniformly below a ceiling that doubles up to the maximum", () => {
    const policy = { baseDelayMs: 100, maxDelayMs: 1_000 };
    expect([1, 2, 3, 4, 5, 9].map((n) => retryDelay(n, policy, () => 0.999999))).toEqual([99, 199, 399, 799, 999, 999]);
    expect(retryDelay(3, policy, () => 0)).toBe(0);
    expect(retryDelay(3, policy, () => 0.5)).toBe(200);
  });

  it("waits at least what Retry-After asks", () => {
    expect(retryDelay(1, { baseDelayMs: 100 }, () => 0.5, 2_000)).toBe(2_000);
    expect(retryDelay(5, { baseDelayMs: 1_000, maxDelayMs: 60_000 }, () => 0.999, 0)).toBe(15_984);
  });
});

describe("canRetry", () => {
  it("retries a retryable failure when idempotent, or when it certainly had no effect", () => {
    expect(canRetry(apiError(), true)).toBe(true);
    expect(canRetry(apiError(), false)).toBe(false);
    expect(canRetry(apiError({ status: 0, code: "connect_failed", mayHaveTakenEffect: false }), false)).toBe(true);
    expect(canRetry(apiError({ retryable: false }), true)).toBe(false);
    expect(canRetry(new Error("bug"), true)).toBe(false);
  });
});

describe("withRetry", () => {
  const fast = { random: () => 0, sleep: async () => undefined };

  it("does not retry an error that is not a ProviderApiError (a bug), and keeps it as is", async () => {
    let calls = 0;
    const bug = new TypeError("undefined is not a function");
    await expect(
      withRetry(
        async () => {
          calls += 1;
          throw bug;
        },
        { idempotent: true, ...fast },
      ),
    ).rejects.toBe(bug);
    expect(calls).toBe(1);
  });

  it("tells each attempt its number and the budget left", async () => {
    let t = 0;
    const seen: Array<[number, number]> = [];
    await withRetry(
      async ({ attempt, remainingMs }) => {
        seen.push([attempt, remainingMs]);
        t += 1_000;
        if (attempt < 3) throw apiError();
        return "ok";
      },
      { idempotent: true, totalMs: 10_000, now: () => t, ...fast },
    );
    expect(seen).toEqual([
      [1, 10_000],
      [2, 9_000],
      [3, 8_000],
    ]);
  });

  it("rejects a budget that is not one", async () => {
    await expect(withRetry(async () => 1, { idempotent: true, attempts: 0 })).rejects.toThrow("retry.attempts: expected a positive integer, got 0");
    await expect(withRetry(async () => 1, { idempotent: true, totalMs: Number.NaN })).rejects.toThrow(/retry.totalMs/);
  });
});

describe("ProviderApiError", () => {
  it("is recognised by brand, copies with changes, and serialises its fields", () => {
    const error = apiError({ requestId: "r-1" });
    const copy = error.with({ attempts: 4 });
    expect(isProviderApiError(copy)).toBe(true);
    expect(isProviderApiError({ ...error })).toBe(false);
    expect(copy.message).toBe("v op failed: HTTP 503 http_503: busy [request r-1] (after 4 attempts)");
    expect(JSON.parse(JSON.stringify(copy))).toMatchObject({ name: "ProviderApiError", status: 503, code: "http_503", attempts: 4, requestId: "r-1" });
    expect(apiError({ status: 0, code: "timeout", detail: "no response within 5 ms" }).message).toBe("v op failed: no response (timeout): no response within 5 ms");
  });
});
