import { HttpError } from "@paperclip-sandbox/emulator-kit";

/**
 * The sandbox container's error body (0.7.x `ErrorResponse`): `{code, message, context, httpStatus,
 * timestamp, suggestion?}`. The SDK maps `code` to its typed errors (SessionAlreadyExistsError, ...).
 */
export const containerErrorEnvelope = ({ status, message, code, details }: { status: number; message: string; code?: string; details?: unknown }) => ({
  code: code ?? (status === 404 ? "NOT_FOUND" : status === 400 ? "VALIDATION_FAILED" : "INTERNAL_ERROR"),
  message,
  context: (details as Record<string, unknown> | undefined) ?? {},
  httpStatus: status,
  timestamp: new Date().toISOString(),
});

export const containerError = (status: number, code: string, message: string, context: Record<string, unknown> = {}) => new HttpError(status, message, { code, details: context });
