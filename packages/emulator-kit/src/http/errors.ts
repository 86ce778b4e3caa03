/** What the kit knows about an error answer; a vendor's envelope turns it into its JSON body. */
export interface ErrorInfo {
  readonly status: number;
  readonly message: string;
  /** Vendor or protocol error code (`not_found`, `FILE_NOT_FOUND`…), when there is one. */
  readonly code?: string;
  readonly details?: unknown;
}

/** Builds a vendor's JSON error body, e.g. E2B's `({status, message}) => ({code: status, message})`. */
export type ErrorEnvelope = (error: ErrorInfo) => unknown;

/** The kit's default body when an emulator names no envelope. */
export const defaultErrorEnvelope: ErrorEnvelope = ({ status, message, code }) => ({
  error: { status, ...(code === undefined ? {} : { code }), message },
});

export interface HttpErrorOptions {
  code?: string;
  details?: unknown;
  headers?: Record<string, string>;
}

/** Thrown by handlers (and the kit's helpers) to answer with a vendor-shaped error. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly details: unknown;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, options: HttpErrorOptions = {}) {
    super(message);
    this.name = "HttpError";
    if (!(Number.isInteger(status) && status >= 400 && status <= 599)) {
      throw new TypeError(`HttpError status: must be an integer within 400..599 (got ${status})`);
    }
    this.status = status;
    this.code = options.code;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  get info(): ErrorInfo {
    return {
      status: this.status,
      message: this.message,
      ...(this.code === undefined ? {} : { code: this.code }),
      ...(this.details === undefined ? {} : { details: this.details }),
    };
  }
}

export function isHttpError(error: unknown): error is HttpError {
  return error instanceof HttpError;
}
