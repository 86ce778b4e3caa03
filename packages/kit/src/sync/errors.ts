/**
 * Every sync failure surfaces as one `SyncError` with a stable `code`, so callers branch on the code
 * and never on message text. Messages name paths and exit codes only: never a post-upload command,
 * an environment value or file content, because they end up in host logs.
 */
export type SyncErrorCode =
  /** `SyncOptions` or a mapping field is malformed (e.g. no roots, a non-positive limit). */
  | "SYNC_OPTIONS_INVALID"
  /** A sandbox path is not absolute, not normalized, or contains a newline/NUL. */
  | "SYNC_PATH_INVALID"
  /** A sandbox path (lexically, or after the sandbox resolved symlinks) is outside every root. */
  | "SYNC_PATH_OUTSIDE_ROOT"
  /** The source is missing or is not of the mapping's kind. */
  | "SYNC_SOURCE_INVALID"
  /** The target exists with a kind the mapping cannot replace (e.g. a directory for a file). */
  | "SYNC_TARGET_INVALID"
  /** An outbound archive has a member or link that could land outside the target. */
  | "SYNC_ARCHIVE_UNSAFE"
  /** An outbound transfer exceeded `maxOutboundBytes`. */
  | "SYNC_TOO_LARGE"
  /** A post-upload command exited non-zero or timed out. */
  | "SYNC_COMMAND_FAILED"
  /** A sandbox-side sync script failed (tar, mv, a short transfer...). */
  | "SYNC_REMOTE_FAILED"
  /** A host-side filesystem step failed (packing, staging, extraction, rename). */
  | "SYNC_HOST_FAILED"
  /** The runner itself rejected (sandbox gone, connection lost). */
  | "SYNC_TRANSPORT_FAILED"
  /** The transport cannot carry this strategy safely (e.g. streaming over a binary-unsafe runner); nothing was written. */
  | "SYNC_TRANSPORT_UNSUITABLE"
  /** `SyncOptions.signal` aborted the sync. */
  | "SYNC_ABORTED";

export interface SyncErrorDetails {
  operationId?: string;
  exitCode?: number | null;
  /** Last bytes of the sandbox stderr (bounded by `maxStderrBytes`, then trimmed for the message). */
  stderrTail?: string;
  cause?: unknown;
}

export class SyncError extends Error {
  readonly code: SyncErrorCode;
  readonly operationId: string | undefined;
  readonly exitCode: number | null | undefined;
  readonly stderrTail: string | undefined;

  constructor(code: SyncErrorCode, message: string, details: SyncErrorDetails = {}) {
    super(`${code}: ${message}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "SyncError";
    this.code = code;
    this.operationId = details.operationId;
    this.exitCode = details.exitCode;
    this.stderrTail = details.stderrTail;
  }
}

export function isSyncError(value: unknown): value is SyncError {
  return value instanceof SyncError;
}

/** Characters of stderr quoted in an error message (the full bounded tail stays on `stderrTail`). */
const MESSAGE_TAIL_CHARS = 4000;

export function describeStderrTail(tail: string): string {
  const trimmed = tail.trim();
  if (trimmed === "") return "";
  const shown = trimmed.length > MESSAGE_TAIL_CHARS ? `...${trimmed.slice(-MESSAGE_TAIL_CHARS)}` : trimmed;
  return `; stderr: ${shown}`;
}

/** Attach the operation id to an error thrown below the operation loop, wrapping foreign errors. */
export function asSyncError(error: unknown, operationId: string): SyncError {
  if (error instanceof SyncError) {
    if (error.operationId !== undefined) return error;
    const tagged = new SyncError(error.code, error.message.replace(/^[A-Z_]+: /, ""), {
      operationId,
      exitCode: error.exitCode,
      stderrTail: error.stderrTail,
      cause: error.cause,
    });
    return tagged;
  }
  // Name, errno code and path only: enough to act on, and never file content or environment.
  const reason = error instanceof Error ? `${error.name}${errnoCode(error)}${errnoPath(error)}` : "unknown error";
  return new SyncError("SYNC_HOST_FAILED", `operation ${operationId} failed on the host (${reason})`, {
    operationId,
    cause: error,
  });
}

function errnoPath(error: Error): string {
  const where = (error as NodeJS.ErrnoException).path;
  return typeof where === "string" ? ` at ${where}` : "";
}

function errnoCode(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  return typeof code === "string" ? ` ${code}` : "";
}
