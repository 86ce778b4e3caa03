import { STATUS_CODES } from "node:http";
import type { ErrorEnvelope } from "@paperclip-sandbox/emulator-kit";

/**
 * The control plane's (NestJS) error body: `{statusCode, message, error, timestamp}`. The SDK reads
 * `message` (then `error`), and `code`/`source` only to pick a finer error class.
 */
export const apiErrorEnvelope: ErrorEnvelope = ({ status, message, code }) => ({
  statusCode: status,
  message,
  error: STATUS_CODES[status] ?? "Error",
  ...(code === undefined ? {} : { code }),
  timestamp: new Date().toISOString(),
});

/** The toolbox daemon's (gin, common-go) error body; `source: DAYTONA_DAEMON` makes the SDK map `code` to a class. */
export const daemonErrorEnvelope: ErrorEnvelope = ({ status, message, code, details }) => ({
  statusCode: status,
  message,
  code: code ?? defaultDaemonCode(status),
  timestamp: new Date().toISOString(),
  source: (details as { source?: string } | undefined)?.source ?? "DAYTONA_DAEMON",
});

function defaultDaemonCode(status: number): string {
  switch (status) {
    case 400:
      return "BAD_REQUEST";
    case 401:
      return "UNAUTHORIZED";
    case 403:
      return "FORBIDDEN";
    case 404:
      return "NOT_FOUND";
    case 408:
      return "REQUEST_TIMEOUT";
    case 409:
      return "CONFLICT";
    case 410:
      return "GONE";
    default:
      return "INTERNAL_SERVER_ERROR";
  }
}

/** An errno-like backend file error as the daemon answers it: its HTTP status and DaemonErrorCode. */
export function daemonFileError(code: string | undefined): { status: number; code: string } {
  switch (code) {
    case "ENOENT":
      return { status: 404, code: "FILE_NOT_FOUND" };
    case "EACCES":
    case "EPERM":
    case "EROFS":
    case "EOUTSIDE":
      return { status: 403, code: "FILE_ACCESS_DENIED" };
    case "EISDIR":
    case "ENOTDIR":
    case "EINVAL":
      return { status: 400, code: "INVALID_FILE_PATH" };
    default:
      return { status: 500, code: "FILE_READ_FAILED" };
  }
}
