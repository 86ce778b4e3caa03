// How a Modal SDK failure reads: a gRPC status through the kit's one table (apiErrorFromGrpcStatus),
// with Modal's meanings on top; the SDK's own errors keep their name.
import { describe, expect, it } from "vitest";
import { createRedactor } from "@paperclip-sandbox/kit";
import { isGone, modalError } from "./client.js";

const redact = createRedactor(["as-secret-1234"]);
const clientError = (code: number, details: string) => Object.assign(new Error(`/modal.client.ModalClient/SandboxCreate ${details}`), { name: "ClientError", code, details });

describe("modalError", () => {
  it("reads a gRPC status by the kit's table: its name, the HTTP status Connect pairs with it, NOT_FOUND gone", () => {
    expect(modalError("getSandbox", clientError(5, "no such sandbox"), redact)).toMatchObject({ vendor: "modal", code: "not_found", status: 404, gone: true, retryable: false });
    expect(modalError("x", clientError(99, "?"), redact)).toMatchObject({ code: "unknown", status: 500 });
    expect(isGone(clientError(5, "gone"))).toBe(true);
  });

  it("retries RESOURCE_EXHAUSTED even for a create (nothing was done), and nothing the SDK has already retried", () => {
    expect(modalError("createSandbox", clientError(8, "quota"), redact)).toMatchObject({ code: "resource_exhausted", status: 429, retryable: true, mayHaveTakenEffect: false });
    expect(modalError("createSandbox", clientError(14, "unavailable"), redact)).toMatchObject({ code: "unavailable", status: 503, retryable: false, mayHaveTakenEffect: true });
  });

  it("keeps the SDK's own error names as codes, and redacts the token", () => {
    const notFound = Object.assign(new Error("Sandbox 'sb-1' not found"), { name: "NotFoundError" });
    expect(modalError("fromName", notFound, redact)).toMatchObject({ code: "NotFoundError", status: 0, gone: true });
    expect(modalError("x", clientError(16, "bad token as-secret-1234"), redact).message).not.toContain("as-secret-1234");
  });
});
