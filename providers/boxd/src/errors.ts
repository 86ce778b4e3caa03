import grpc from "@grpc/grpc-js";
import { isProviderApiError, ProviderApiError, type Redactor } from "@paperclip-sandbox/kit";

const CODE_NAMES = new Map<number, string>(Object.entries(grpc.status).filter(([, v]) => typeof v === "number").map(([k, v]) => [v as number, k]));

/** A grpc-js failure: `code` and `details` (a ServiceError), else nothing we can read. */
export function grpcCodeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "number" && CODE_NAMES.has(code) ? code : undefined;
}

/** The connection never carried the call (nothing reached boxd). */
function notSent(details: string): boolean {
  return /No connection established|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|getaddrinfo|Name resolution failed|failed to connect/i.test(details);
}

/**
 * A boxd gRPC failure as the kit's typed error (code = the gRPC status name). boxd's meanings:
 * NOT_FOUND → the machine or snapshot is gone; UNAVAILABLE, ABORTED and DEADLINE_EXCEEDED may be
 * retried (an idempotent call, or one that never left); RESOURCE_EXHAUSTED is a refusal (quota or
 * rate), retried after a pause; INVALID_ARGUMENT, ALREADY_EXISTS, FAILED_PRECONDITION,
 * PERMISSION_DENIED and UNAUTHENTICATED are final answers.
 */
export function boxdError(operation: string, error: unknown, redact: Redactor): Error {
  if (isProviderApiError(error)) return error;
  const code = grpcCodeOf(error);
  if (code === undefined) return error instanceof Error ? new Error(redact(error.message)) : new Error(redact(String(error)));
  const details = redact(String((error as { details?: unknown }).details ?? (error as Error).message ?? ""));
  const unsent = code === grpc.status.UNAVAILABLE && notSent(details);
  const retryAfter = Number((error as { metadata?: grpc.Metadata }).metadata?.get?.("retry-after")?.[0]);
  return new ProviderApiError({
    vendor: "boxd",
    operation,
    status: 0,
    code: CODE_NAMES.get(code)!,
    detail: details || CODE_NAMES.get(code)!,
    retryable: code === grpc.status.UNAVAILABLE || code === grpc.status.ABORTED || code === grpc.status.DEADLINE_EXCEEDED || code === grpc.status.RESOURCE_EXHAUSTED,
    gone: code === grpc.status.NOT_FOUND,
    mayHaveTakenEffect: !(unsent || code === grpc.status.RESOURCE_EXHAUSTED || code === grpc.status.UNAUTHENTICATED),
    ...(Number.isFinite(retryAfter) && retryAfter >= 0 ? { retryAfterMs: retryAfter * 1000 } : {}),
  });
}

/** The gRPC status name of a boxd error (`NOT_FOUND`), if it is one. */
export function boxdCode(error: unknown): string | undefined {
  if (isProviderApiError(error) && error.vendor === "boxd") return error.code;
  const code = grpcCodeOf(error);
  return code === undefined ? undefined : CODE_NAMES.get(code);
}
