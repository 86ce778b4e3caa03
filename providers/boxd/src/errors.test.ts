import grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { boxdError } from "./errors.js";

/** What grpc-js rejects a call with: a ServiceError's code, details and metadata. */
function serviceError(code: grpc.status, details: string, retryAfter?: string) {
  const metadata = new grpc.Metadata();
  if (retryAfter !== undefined) metadata.set("retry-after", retryAfter);
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata });
}

const redact = (text: string) => text.replaceAll("sk-secret", "[redacted]");

describe("boxdError", () => {
  it("reads a gRPC status with boxd's meanings: what is retried, what is gone, what certainly did nothing", () => {
    const cases = [
      [grpc.status.NOT_FOUND, "machine m-1 not found", { code: "not_found", status: 404, gone: true, retryable: false, mayHaveTakenEffect: true }],
      [grpc.status.ABORTED, "conflict, try again", { code: "aborted", retryable: true, gone: false }],
      [grpc.status.DEADLINE_EXCEEDED, "took too long", { code: "deadline_exceeded", status: 504, retryable: true }],
      [grpc.status.INTERNAL, "boom", { code: "internal", retryable: false }],
      [grpc.status.UNKNOWN, "?", { code: "unknown", retryable: false }],
      [grpc.status.RESOURCE_EXHAUSTED, "quota", { code: "resource_exhausted", status: 429, retryable: true, mayHaveTakenEffect: false }],
      [grpc.status.UNAVAILABLE, "No connection established. Last error: connect ECONNREFUSED", { code: "unavailable", retryable: true, mayHaveTakenEffect: false }],
      [grpc.status.UNAVAILABLE, "Connection dropped", { code: "unavailable", retryable: true, mayHaveTakenEffect: true }],
    ] as const;
    for (const [code, details, expected] of cases) expect(boxdError("GetVm", serviceError(code, details), redact), details).toMatchObject({ vendor: "boxd", operation: "GetVm", ...expected });
  });

  it("says what boxd answered, not that no answer came; redacts it and keeps a retry-after", () => {
    const error = boxdError("CreateVm", serviceError(grpc.status.PERMISSION_DENIED, "key sk-secret may not create machines", "3"), redact);
    expect(error.message).not.toContain("no response");
    expect(error.message).toContain("permission_denied");
    expect(error.message).toContain("key [redacted] may not create machines");
    expect(error.message).not.toContain("sk-secret");
    expect(error).toMatchObject({ retryable: false, retryAfterMs: 3000 });
  });
});
