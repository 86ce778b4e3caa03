const BRAND = Symbol.for("paperclip-sandbox.ProviderApiError");

/** Every field of a `ProviderApiError`; text fields must already be redacted. */
export interface ProviderApiErrorInit {
  /** Vendor name, as the provider calls it (`daytona`, `e2b`). */
  vendor: string;
  /** The call that failed, as the provider names it (`createSandbox`). */
  operation: string;
  /** HTTP status, or 0 when no response arrived (network failure, timeout, abort). */
  status: number;
  /** The vendor's error code when it sent one, else `http_<status>` or a transport code (`timeout`, `connection_reset`…). */
  code: string;
  /** What the vendor (or the transport) said, redacted; the error's `message` is built around it. */
  detail: string;
  /** Trying again may succeed (408/425/429/5xx except 501, resets, timeouts). */
  retryable: boolean;
  /** The resource no longer exists (404/410 or the vendor's "not found" code). */
  gone: boolean;
  /**
   * The request may have reached the vendor and taken effect. Only false when it certainly did
   * not (connection refused, DNS, TLS) or the vendor says it was not processed: a non-idempotent
   * call is retried only then.
   */
  mayHaveTakenEffect: boolean;
  requestId?: string;
  /** The vendor's `Retry-After`, in milliseconds from when the response arrived. */
  retryAfterMs?: number;
  /** How many attempts were made before giving up (set by `withRetry`). */
  attempts?: number;
  /**
   * `grpc` for a gRPC/Connect status: `status` is then the HTTP status Connect pairs with the code
   * (what retries and gone are judged by), and the message names the gRPC code, not an HTTP status
   * the vendor never sent.
   */
  protocol?: "grpc";
}

/** One typed error for every vendor call: HTTP status, vendor code, and the two flags callers act on. */
export class ProviderApiError extends Error {
  override readonly name = "ProviderApiError";
  readonly vendor: string;
  readonly operation: string;
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly retryable: boolean;
  readonly gone: boolean;
  readonly mayHaveTakenEffect: boolean;
  readonly requestId?: string;
  readonly retryAfterMs?: number;
  readonly attempts?: number;
  readonly protocol?: "grpc";

  constructor(init: ProviderApiErrorInit) {
    super(composeMessage(init));
    this.vendor = init.vendor;
    this.operation = init.operation;
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.retryable = init.retryable;
    this.gone = init.gone;
    this.mayHaveTakenEffect = init.mayHaveTakenEffect;
    if (init.requestId !== undefined) this.requestId = init.requestId;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    if (init.attempts !== undefined) this.attempts = init.attempts;
    if (init.protocol !== undefined) this.protocol = init.protocol;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** A copy with some fields changed (the message is rebuilt). */
  with(changes: Partial<ProviderApiErrorInit>): ProviderApiError {
    return new ProviderApiError({ ...this.init(), ...changes });
  }

  init(): ProviderApiErrorInit {
    const { vendor, operation, status, code, detail, retryable, gone, mayHaveTakenEffect, requestId, retryAfterMs, attempts, protocol } = this;
    return { vendor, operation, status, code, detail, retryable, gone, mayHaveTakenEffect, requestId, retryAfterMs, attempts, ...(protocol ? { protocol } : {}) };
  }

  toJSON(): Record<string, unknown> {
    return { name: this.name, message: this.message, ...this.init() };
  }
}

/** True for a `ProviderApiError`, also one made by another copy of the kit. */
export function isProviderApiError(value: unknown): value is ProviderApiError {
  return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[BRAND] === true;
}

function composeMessage(init: ProviderApiErrorInit): string {
  const what = init.status <= 0 ? `no response (${init.code})` : init.protocol === "grpc" ? `gRPC ${init.code}` : `HTTP ${init.status} ${init.code}`;
  const detail = init.detail ? `: ${init.detail}` : "";
  const request = init.requestId ? ` [request ${init.requestId}]` : "";
  const attempts = init.attempts && init.attempts > 1 ? ` (after ${init.attempts} attempts)` : "";
  return `${init.vendor} ${init.operation} failed: ${what}${detail}${request}${attempts}`;
}
