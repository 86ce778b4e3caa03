import { describe, expect, it } from "vitest";
import { createRedactor } from "../redact/index.js";
import { apiErrorFromGrpcStatus, CONNECT_CODE_STATUS, connectCodeOf, GRPC_CODE_NAMES, isRetryableStatus } from "./index.js";

const redact = createRedactor(["s3cret-token-1"]);
const status = (code: number | string, message = "m", extra: { retryAfter?: string; notProcessed?: boolean } = {}) =>
  apiErrorFromGrpcStatus({ vendor: "v", operation: "op", code, message, redact, ...extra });

describe("apiErrorFromGrpcStatus", () => {
  it("retries a gRPC status exactly when its Connect HTTP status would be: UNAVAILABLE as a 503, RESOURCE_EXHAUSTED as a 429", () => {
    for (const [name, http] of Object.entries(CONNECT_CODE_STATUS)) {
      expect(status(name), name).toMatchObject({ code: name, status: http, retryable: isRetryableStatus(http) });
    }
    expect(Object.keys(CONNECT_CODE_STATUS)).toEqual(GRPC_CODE_NAMES.slice(1));
    expect(status(14)).toMatchObject({ code: "unavailable", status: 503, retryable: true, gone: false });
    expect(status(8)).toMatchObject({ code: "resource_exhausted", status: 429, retryable: true });
    expect(status(12)).toMatchObject({ code: "unimplemented", status: 501, retryable: false });
    expect(status(3)).toMatchObject({ code: "invalid_argument", status: 400, retryable: false });
  });

  it("reads NOT_FOUND as gone, as a 404 is", () => {
    expect(status(5)).toMatchObject({ code: "not_found", status: 404, gone: true, retryable: false });
    expect(status("not_found").gone).toBe(true);
  });

  it("reads a number or a name; one outside the table, or OK, is unknown", () => {
    expect(status("deadline_exceeded")).toMatchObject({ code: "deadline_exceeded", status: 504 });
    expect(status(42)).toMatchObject({ code: "unknown", status: 500 });
    expect(status(0).code).toBe("unknown");
    expect(status("bogus").code).toBe("unknown");
    expect([connectCodeOf(1), connectCodeOf("canceled"), connectCodeOf("CANCELLED")]).toEqual(["canceled", "canceled", "unknown"]);
  });

  it("keeps the vendor's retry-after and its word that nothing was done; redacts the message", () => {
    expect(status(8, "slow down", { retryAfter: "2", notProcessed: true })).toMatchObject({ retryAfterMs: 2_000, mayHaveTakenEffect: false });
    expect(status(13, "bug").mayHaveTakenEffect).toBe(true);
    const error = status(16, "token s3cret-token-1 expired");
    expect(error.detail).not.toContain("s3cret-token-1");
    // The message names the gRPC code, not the HTTP status the code is judged by (none was sent).
    expect(error.message).toMatch(/^v op failed: gRPC unauthenticated: token .* expired$/);
    expect(error.with({ retryable: true }).message).toBe(error.message);
    expect(status(13, "").detail).toBe("internal");
  });
});
