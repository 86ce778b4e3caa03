import { HttpError, type ErrorInfo } from "@paperclip-sandbox/emulator-kit";

/** One field problem, as the API server lists it in `details.causes`. */
export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

const REASON_BY_CODE: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  409: "AlreadyExists",
  410: "Expired",
  413: "RequestEntityTooLarge",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/** A `metav1.Status` failure: what every API error answers with. */
export function statusBody(info: ErrorInfo): Record<string, unknown> {
  const details = info.details as StatusDetails | undefined;
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: info.message,
    reason: info.code ?? REASON_BY_CODE[info.status] ?? "Unknown",
    ...(details && Object.keys(details).length > 0 ? { details } : {}),
    code: info.status,
  };
}

/** An API error with the real server's reason and details. */
export function apiError(status: number, reason: string, message: string, details?: StatusDetails): HttpError {
  return new HttpError(status, message, { code: reason, ...(details ? { details } : {}) });
}

export const notFound = (resource: string, name: string, group = "") =>
  apiError(404, "NotFound", `${qualified(resource, group)} "${name}" not found`, { name, ...(group ? { group } : {}), kind: resource });

export const alreadyExists = (resource: string, name: string, group = "") =>
  apiError(409, "AlreadyExists", `${qualified(resource, group)} "${name}" already exists`, { name, ...(group ? { group } : {}), kind: resource });

export const conflict = (resource: string, name: string, group: string, why: string) =>
  apiError(409, "Conflict", `Operation cannot be fulfilled on ${qualified(resource, group)} "${name}": ${why}`, { name, ...(group ? { group } : {}), kind: resource });

export const badRequest = (message: string) => apiError(400, "BadRequest", message);

/** `Pod "x" is invalid: a: Required value, b: Invalid value: ...` with one cause per problem. */
export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): HttpError {
  const what = group ? `${kind}.${group}` : kind;
  const text = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message)).join(", ");
  const list = causes.length > 1 ? `[${text}]` : text;
  return apiError(422, "Invalid", `${what} "${name}" is invalid: ${list}`, { name, ...(group ? { group } : {}), kind, causes });
}

function qualified(resource: string, group: string): string {
  return group ? `${resource}.${group}` : resource;
}

export function successStatus(details: StatusDetails): Record<string, unknown> {
  return { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", details };
}
