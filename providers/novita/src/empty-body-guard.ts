import { isGoneStatus, isRetryableStatus, ProviderApiError } from "@paperclip-sandbox/kit";

/** The SDK's logger interface (console-like). */
export interface SdkLogger {
  debug?: (...args: unknown[]) => void;
  info?: (...args: unknown[]) => void;
  warn?: (...args: unknown[]) => void;
  error?: (...args: unknown[]) => void;
}

/**
 * Novita's SDK treats an error response with an empty body as success: openapi-fetch leaves `error`
 * undefined for a non-2xx answer with `Content-Length: 0`, and `handleApiError` returns nothing
 * then (a kill answered `500` with no body "succeeds"). The SDK's API logger still sees every
 * response's status (`"Response:", status, statusText`), so a per-call logger records the worst one
 * and the provider checks it after the call.
 */
export function statusRecorder(): { logger: SdkLogger; errorStatus(): number | undefined } {
  let worst: number | undefined;
  const record = (...args: unknown[]) => {
    if (args[0] === "Response:" && typeof args[1] === "number" && args[1] >= 400) worst = Math.max(worst ?? 0, args[1]);
  };
  // No `debug`: the SDK's stream logger then skips formatting every event.
  return { logger: { info: record, error: record, warn: () => undefined }, errorStatus: () => worst };
}

export interface GuardedCallOptions {
  operation: string;
  /** Statuses that the caller handles as an answer (kill: 404 is gone, which is success). */
  accept?: readonly number[];
  /**
   * False for calls that return a sandbox object (create, connect): the SDK keeps the logger on it
   * for every later envd call. Such a call cannot take an empty error body for success (the SDK
   * reads the missing body's fields and fails), so the guard only names that failure.
   */
  recordStatus?: boolean;
}

/**
 * Runs one SDK call with a status recorder and refuses an error status the SDK let through as
 * success, or that made it fail with something unrelated (a create whose empty body left no data).
 * Returns the accepted error status, if any, next to the result.
 */
export async function guardedCall<T>(options: GuardedCallOptions, call: (logger: SdkLogger | undefined) => Promise<T>): Promise<{ value: T; acceptedStatus?: number }> {
  if (options.recordStatus === false) {
    try {
      return { value: await call(undefined) };
    } catch (error) {
      if (error instanceof TypeError && /Cannot read properties of (undefined|null)/.test(error.message)) throw emptyBodyError(options.operation, undefined);
      throw error;
    }
  }
  const recorder = statusRecorder();
  let value: T;
  try {
    value = await call(recorder.logger);
  } catch (error) {
    const status = recorder.errorStatus();
    // The SDK failed because the error body was empty (e.g. `res.data!` of a create): say what happened.
    if (status !== undefined && !(error instanceof Error && /^\d{3}: /.test(error.message)) && !isNamedSdkError(error)) throw emptyBodyError(options.operation, status);
    throw error;
  }
  const status = recorder.errorStatus();
  if (status === undefined) return { value };
  if (options.accept?.includes(status)) return { value, acceptedStatus: status };
  throw emptyBodyError(options.operation, status);
}

function isNamedSdkError(error: unknown): boolean {
  return error instanceof Error && /Error$/.test(error.name) && error.name !== "Error" && error.name !== "TypeError";
}

/** An error answer without a body; `status` undefined when the SDK hid it (create, connect). */
export function emptyBodyError(operation: string, status: number | undefined): ProviderApiError {
  return new ProviderApiError({
    vendor: "novita",
    operation,
    status: status ?? 0,
    code: status === undefined ? "empty_error_body" : `http_${status}`,
    detail:
      status === undefined ? "Novita answered an error without a body (the SDK could not read its answer)" : `Novita answered HTTP ${status} with no error body (the SDK reports that as success)`,
    retryable: status === undefined ? true : isRetryableStatus(status),
    gone: status === undefined ? false : isGoneStatus(status),
    mayHaveTakenEffect: true,
  });
}
