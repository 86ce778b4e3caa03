import { describe, expect, it } from "vitest";
import { envdApiError, envdCall, SANDBOX_NOT_RUNNING } from "./errors.js";

const named = (name: string, message: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(message), { name }, extra);
const connectError = (code: number, message: string, headers: Record<string, string> = {}) =>
  Object.assign(new Error(`[x] ${message}`), { name: "ConnectError", code, rawMessage: message, metadata: new Headers(headers) });

describe("envdApiError", () => {
  it("maps the SDKs' typed errors by name", () => {
    expect(envdApiError("e2b", "get", named("SandboxNotFoundError", "Sandbox x not found"))).toMatchObject({ status: 404, gone: true, retryable: false });
    expect(envdApiError("e2b", "kill", named("RateLimitError", "slow down"))).toMatchObject({ status: 429, retryable: true, mayHaveTakenEffect: false });
    expect(envdApiError("e2b", "create", named("ServiceBusyError", "busy"))).toMatchObject({ status: 503, retryable: true, mayHaveTakenEffect: false });
    expect(envdApiError("e2b", "create", named("AuthenticationError", "Unauthorized"))).toMatchObject({ status: 401, retryable: false });
    expect(envdApiError("e2b", "x", named("NotFoundError", "nope"), { notFoundMeansGone: true })).toMatchObject({ gone: true });
    expect(envdApiError("e2b", "x", named("NotFoundError", "nope"))).toMatchObject({ gone: false });
  });

  it("reads the status of an SDK's '<status>: message' error (Novita) or its statusCode (e2b)", () => {
    expect(envdApiError("novita", "kill", named("SandboxError", "500: boom"))).toMatchObject({ status: 500, code: "http_500", retryable: true });
    expect(envdApiError("novita", "kill", named("SandboxError", "404: gone"), { notFoundMeansGone: true })).toMatchObject({ status: 404, gone: true });
    expect(envdApiError("e2b", "kill", named("SandboxError", "teapot", { statusCode: 418 }))).toMatchObject({ status: 418, retryable: false });
  });

  it("maps envd ConnectErrors: a refusal before the start event did not run anything", () => {
    const busy = envdApiError("e2b", "process.Start", connectError(8, "quota", { "retry-after": "2" }), { beforeStart: true });
    expect(busy).toMatchObject({ status: 429, code: "resource_exhausted", retryable: true, mayHaveTakenEffect: false, retryAfterMs: 2000 });
    expect(envdApiError("e2b", "process.Start", connectError(14, "paused"), { beforeStart: true })).toMatchObject({ code: SANDBOX_NOT_RUNNING, retryable: false, mayHaveTakenEffect: false });
    expect(envdApiError("e2b", "process.Start", connectError(4, "deadline"))).toMatchObject({ code: "deadline_exceeded", status: 504 });
    // Retried as an HTTP 500 is (the kit's one table), but a start that may have run is not resent.
    expect(envdApiError("e2b", "process.Start", connectError(13, "bug"))).toMatchObject({ code: "internal", status: 500, retryable: true, mayHaveTakenEffect: true });
    // A process or file not found is not the sandbox gone, unless the caller says so.
    expect(envdApiError("e2b", "process.SendSignal", connectError(5, "no process"))).toMatchObject({ code: "not_found", gone: false });
    expect(envdApiError("e2b", "files.stat", connectError(5, "no sandbox"), { notFoundMeansGone: true })).toMatchObject({ gone: true });
  });

  it("maps fetch failures to transport codes", () => {
    const refused = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }) });
    expect(envdApiError("e2b", "get", refused)).toMatchObject({ status: 0, code: "connect_failed", retryable: true, mayHaveTakenEffect: false });
  });
});

describe("envdCall", () => {
  it("retries an idempotent call after a retryable failure, and a create only when nothing was processed", async () => {
    let calls = 0;
    const value = await envdCall({ vendor: "e2b", operation: "kill", idempotent: true, baseDelayMs: 1 }, async () => {
      calls += 1;
      if (calls < 3) throw named("SandboxError", "502: bad gateway");
      return "done";
    });
    expect([value, calls]).toEqual(["done", 3]);
    let creates = 0;
    await expect(
      envdCall({ vendor: "e2b", operation: "create", idempotent: false, baseDelayMs: 1 }, async () => {
        creates += 1;
        throw named("SandboxError", "502: bad gateway");
      }),
    ).rejects.toMatchObject({ status: 502 });
    expect(creates).toBe(1);
    let limited = 0;
    await envdCall({ vendor: "e2b", operation: "create", idempotent: false, baseDelayMs: 1 }, async () => {
      limited += 1;
      if (limited === 1) throw named("RateLimitError", "quota");
    });
    expect(limited).toBe(2);
  });
});
