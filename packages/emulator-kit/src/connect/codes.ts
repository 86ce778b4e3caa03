import { CONNECT_CODE_STATUS, type ConnectCode } from "@paperclip-sandbox/kit";

// The code table is the kit's (one table for clients and servers): re-exported here.
export { CONNECT_CODE_STATUS, type ConnectCode };

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
