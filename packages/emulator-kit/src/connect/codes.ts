/** Connect error codes (connectrpc.com/docs/protocol#error-codes). */
export type ConnectCode =
  | "canceled"
  | "unknown"
  | "invalid_argument"
  | "deadline_exceeded"
  | "not_found"
  | "already_exists"
  | "permission_denied"
  | "resource_exhausted"
  | "failed_precondition"
  | "aborted"
  | "out_of_range"
  | "unimplemented"
  | "internal"
  | "unavailable"
  | "data_loss"
  | "unauthenticated";

/** The HTTP status a unary error is answered with, per the protocol's table. */
export const CONNECT_CODE_STATUS: Readonly<Record<ConnectCode, number>> = {
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
};

export const CONNECT_CODES = Object.keys(CONNECT_CODE_STATUS) as ConnectCode[];

/** The code a gateway-ish HTTP error (an auth helper, a fault) stands for on a Connect route. */
export function connectCodeForStatus(status: number): ConnectCode {
  switch (status) {
    case 400:
      return "invalid_argument";
    case 401:
      return "unauthenticated";
    case 403:
      return "permission_denied";
    case 404:
      return "not_found";
    case 409:
      return "already_exists";
    case 413:
    case 429:
      return "resource_exhausted";
    case 415:
    case 501:
      return "unimplemented";
    case 499:
      return "canceled";
    case 504:
      return "deadline_exceeded";
    case 502:
    case 503:
      return "unavailable";
    default:
      return status >= 500 ? "internal" : "unknown";
  }
}

export interface ConnectErrorOptions {
  /** `details` entries as Connect JSON carries them ({type, value (base64), debug?}). */
  details?: unknown[];
  /** Sent as response headers (unary) or end-stream metadata (streams). */
  metadata?: Record<string, string | string[]>;
}

/** Thrown by Connect handlers; becomes the protocol's error JSON. */
export class ConnectError extends Error {
  readonly code: ConnectCode;
  readonly details: unknown[] | undefined;
  readonly metadata: Record<string, string | string[]>;

  constructor(code: ConnectCode, message: string, options: ConnectErrorOptions = {}) {
    super(message);
    this.name = "ConnectError";
    if (!CONNECT_CODES.includes(code)) throw new TypeError(`ConnectError code: must be one of ${CONNECT_CODES.join(", ")} (got ${JSON.stringify(code)})`);
    this.code = code;
    this.details = options.details;
    this.metadata = options.metadata ?? {};
  }

  toJSON(): { code: ConnectCode; message: string; details?: unknown[] } {
    return { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) };
  }
}
