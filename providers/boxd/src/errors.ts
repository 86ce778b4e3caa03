import grpc from "@grpc/grpc-js";
import { apiErrorFromFailure, apiErrorFromGrpcStatus, classifyNetworkError, grpcCodeName, isProviderApiError, type Redactor } from "@paperclip-sandbox/kit";

/** A grpc-js failure: `code` and `details` (a ServiceError), else nothing we can read. */
function grpcCodeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" && grpcCodeName(code) !== undefined ? code : undefined;
}

/** The connection never carried the call (nothing reached boxd): grpc-js's wording, or a socket code the kit's table says was never sent. */
function notSent(details: string): boolean {
  if (/No connection established|Name resolution failed|failed to connect/i.test(details)) return true;
  const network = classifyNetworkError(new Error(details));
  return network !== undefined && !network.mayHaveTakenEffect;
}

/** boxd's codes worth another try: an idempotent call, or one that never left; resource_exhausted after a pause. */
const RETRYABLE = new Set<number>([grpc.status.UNAVAILABLE, grpc.status.ABORTED, grpc.status.DEADLINE_EXCEEDED, grpc.status.RESOURCE_EXHAUSTED]);

/**
 * A boxd gRPC failure as the kit's typed error (`apiErrorFromGrpcStatus`: code = the snake_case gRPC
 * name, status = the HTTP status Connect pairs with it), with boxd's meanings: not_found → the
 * machine or snapshot is gone; unavailable, aborted, deadline_exceeded and resource_exhausted may be
 * retried; internal, unknown, invalid_argument, already_exists, failed_precondition,
 * permission_denied and unauthenticated are final answers. A failure that is not a gRPC status goes
 * to the kit's one network table.
 */
export function boxdError(operation: string, error: unknown, redact: Redactor): Error {
  if (isProviderApiError(error)) return error;
  const code = grpcCodeOf(error);
  if (code === undefined) return apiErrorFromFailure({ vendor: "boxd", operation, error, redact });
  const details = String((error as { details?: unknown }).details ?? (error as Error).message ?? "");
  const unsent = code === grpc.status.UNAVAILABLE && notSent(details);
  const retryAfter = (error as { metadata?: grpc.Metadata }).metadata?.get?.("retry-after")?.[0];
  return apiErrorFromGrpcStatus({
    vendor: "boxd",
    operation,
    code,
    message: details,
    redact,
    notProcessed: unsent || code === grpc.status.RESOURCE_EXHAUSTED || code === grpc.status.UNAUTHENTICATED,
    ...(typeof retryAfter === "string" ? { retryAfter } : {}),
  }).with({ retryable: RETRYABLE.has(code) });
}

/** The kit's gRPC code name of a boxd error (`not_found`), if it is one. */
export function boxdCode(error: unknown): string | undefined {
  if (isProviderApiError(error) && error.vendor === "boxd") return error.code;
  const code = grpcCodeOf(error);
  return code === undefined ? undefined : grpcCodeName(code);
}
