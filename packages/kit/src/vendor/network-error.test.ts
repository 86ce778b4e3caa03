import { describe, expect, it } from "vitest";
import { createRedactor } from "../redact/index.js";
import { envdApiError } from "../families/envd/errors.js";
import { apiErrorFromFailure, classifyNetworkError } from "./network-error.js";

const withCode = (code: string, message = `connect ${code} 10.0.0.1:443`) => Object.assign(new Error(message), { code });
/** How undici reports a socket error: `TypeError: fetch failed` with the Node error as its cause. */
const fetchFailed = (code: string) => Object.assign(new TypeError("fetch failed"), { cause: withCode(code) });

describe("classifyNetworkError: the one table every translator delegates to", () => {
  it.each([
    ["ECONNREFUSED", "connect_failed", true, false],
    ["EHOSTUNREACH", "connect_failed", true, false],
    ["ENETUNREACH", "connect_failed", true, false],
    ["EADDRNOTAVAIL", "connect_failed", true, false],
    ["EAI_AGAIN", "connect_failed", true, false],
    ["UND_ERR_CONNECT_TIMEOUT", "connect_failed", true, false],
    ["ENOTFOUND", "dns_not_found", false, false],
    ["ETIMEDOUT", "timeout", true, true],
    ["UND_ERR_HEADERS_TIMEOUT", "timeout", true, true],
    ["ECONNRESET", "connection_reset", true, true],
    ["EPIPE", "connection_reset", true, true],
    ["UND_ERR_SOCKET", "connection_reset", true, true],
    ["CERT_HAS_EXPIRED", "tls", false, false],
    ["ERR_TLS_CERT_ALTNAME_INVALID", "tls", false, false],
  ])("%s is %s (retryable %s, may have taken effect %s), on the error or down its cause chain", (code, expected, retryable, mayHaveTakenEffect) => {
    const want = { code: expected, retryable, mayHaveTakenEffect };
    expect(classifyNetworkError(withCode(code))).toEqual(want);
    expect(classifyNetworkError(fetchFailed(code))).toEqual(want);
  });

  it("reads a code an SDK only printed in its message (axios-style wrappers drop the error object)", () => {
    expect(classifyNetworkError(new Error("request to https://x failed, reason: connect EHOSTUNREACH 10.0.0.1:443"))).toMatchObject({ code: "connect_failed" });
    expect(classifyNetworkError(new Error("read ETIMEDOUT"))).toMatchObject({ code: "timeout" });
  });

  it("is not fooled by words: an SDK's own 'terminated' message is not a network failure", () => {
    expect(classifyNetworkError(new Error("the sandbox was terminated"))).toBeUndefined();
    expect(classifyNetworkError(new TypeError("terminated"))).toMatchObject({ code: "connection_reset" });
    expect(classifyNetworkError(new TypeError("fetch failed"))).toMatchObject({ code: "network", retryable: true });
    expect(classifyNetworkError(new Error("boom"))).toBeUndefined();
  });

  it("gives the HTTP client and the envd translator the same answer for the codes they used to disagree on", () => {
    const redact = createRedactor([]);
    for (const code of ["ETIMEDOUT", "EHOSTUNREACH", "EAI_AGAIN", "ENOTFOUND", "ECONNREFUSED"]) {
      const http = apiErrorFromFailure({ vendor: "v", operation: "op", error: fetchFailed(code), redact });
      const envd = envdApiError("e2b", "op", fetchFailed(code));
      expect([envd.code, envd.retryable, envd.mayHaveTakenEffect], code).toEqual([http.code, http.retryable, http.mayHaveTakenEffect]);
    }
  });
});
