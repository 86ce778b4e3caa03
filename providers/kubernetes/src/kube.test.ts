// How client-node's failures read: the kit's status classification (408 and 425 are transient too)
// and its network classifier, for API calls and for the exec handshake.
import { ApiException } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { toApiError } from "./kube.js";

const status = (code: number, reason?: string, headers: Record<string, string> = {}) =>
  toApiError(new ApiException(code, `HTTP ${code}`, JSON.stringify({ kind: "Status", reason, message: `status ${code}` }), headers), "getThing");

describe("toApiError", () => {
  it("classifies statuses as the kit does: 408, 425, 429 and 5xx but 501 are transient; 404 and 410 are gone", () => {
    for (const code of [408, 425, 429, 500, 502, 503, 504]) expect(status(code), String(code)).toMatchObject({ status: code, retryable: true });
    for (const code of [400, 403, 409, 422, 501]) expect(status(code), String(code)).toMatchObject({ status: code, retryable: false });
    expect(status(404, "NotFound")).toMatchObject({ gone: true, code: "NotFound", detail: "status 404" });
    expect(status(410, "Expired")).toMatchObject({ gone: true });
    expect(status(429, undefined, { "retry-after": "3" })).toMatchObject({ mayHaveTakenEffect: false, retryAfterMs: 3_000 });
  });

  it("reads a failure without a response through the kit's network classifier", () => {
    const refused = Object.assign(new Error("connect EHOSTUNREACH 10.0.0.1:6443"), { code: "EHOSTUNREACH" });
    expect(toApiError(refused, "getThing")).toMatchObject({ status: 0, code: "connect_failed", retryable: true, mayHaveTakenEffect: false });
    expect(toApiError(Object.assign(new Error("read ETIMEDOUT"), { code: "ETIMEDOUT" }), "getThing")).toMatchObject({ code: "timeout", retryable: true, mayHaveTakenEffect: true });
  });
});
