/** Coder's error body (`codersdk.Response`): `{message, detail?, validations?: [{field, detail}]}`. */
import { HttpError, type ErrorEnvelope } from "@paperclip-sandbox/emulator-kit";

export interface CoderErrorDetails {
  detail?: string;
  validations?: Array<{ field: string; detail: string }>;
}

export const coderErrorEnvelope: ErrorEnvelope = ({ message, details }) => {
  const extra = (details ?? {}) as CoderErrorDetails;
  return {
    message,
    ...(extra.detail ? { detail: extra.detail } : {}),
    ...(extra.validations ? { validations: extra.validations } : {}),
  };
};

export function coderError(status: number, message: string, details: CoderErrorDetails = {}): HttpError {
  return new HttpError(status, message, { details });
}

/** `httpapi.ResourceNotFound`: Coder answers 404 this way for anything missing or not visible. */
export function notFound(): HttpError {
  return coderError(404, "Resource not found or you do not have access to this resource");
}
