import type { Redactor } from "../redact/index.js";
import { ProviderApiError } from "./api-error.js";
import { isGoneStatus, isRetryableStatus } from "./classify.js";
import { CONNECT_CODE_STATUS, connectCodeOf } from "./grpc-codes.js";
import { parseRetryAfter } from "./retry-after.js";
import { vendorText } from "./vendor-text.js";

export interface GrpcStatusInput {
  vendor: string;
  operation: string;
  /** The status: its number on the wire (grpc-js, nice-grpc, connect-es) or Connect's snake_case name. */
  code: number | string;
  /** The status message (gRPC `details`, Connect `message`); redacted and shortened here. */
  message: string;
  redact: Redactor;
  /** The call's `retry-after` metadata (seconds or an HTTP date), when it sent one. */
  retryAfter?: string | null;
  /** The vendor's word that nothing was done (a refusal before processing): then even a create may be resent. */
  notProcessed?: boolean;
}

/**
 * A gRPC or Connect status as the kit's `ProviderApiError`. `code` is the snake_case name; `status`
 * is the HTTP status Connect pairs with it (`CONNECT_CODE_STATUS`), and `retryable` and `gone` are
 * read from that status as for any HTTP answer (`isRetryableStatus`, `isGoneStatus`): UNAVAILABLE is
 * retried as a 503 is, RESOURCE_EXHAUSTED as a 429, NOT_FOUND is gone as a 404. A code outside the
 * table (or OK, which is no error) is `unknown`, as the protocol says. A translator with a vendor's
 * own meaning (an SDK that already retried, a code that means "not running") overrides with `.with`.
 */
export function apiErrorFromGrpcStatus(input: GrpcStatusInput): ProviderApiError {
  const code = connectCodeOf(input.code);
  const status = CONNECT_CODE_STATUS[code];
  const retryAfterMs = parseRetryAfter(input.retryAfter);
  return new ProviderApiError({
    vendor: input.vendor,
    operation: input.operation,
    status,
    code,
    detail: vendorText(input.message || code, input.redact),
    retryable: isRetryableStatus(status),
    gone: isGoneStatus(status),
    mayHaveTakenEffect: input.notProcessed !== true,
    protocol: "grpc",
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });
}
