/**
 * Errors the CLI reports as one line on stderr. `exitCode` is what the process exits with.
 *
 * - `UsageError` (64): the operator's input is wrong (flag, provider, config file, secret, config).
 * - `CliFailure` (default 1): an operation failed after the input was accepted.
 */
const EXIT_USAGE = 64;
export const EXIT_RUN_INFRA = 125;

export class CliFailure extends Error {
  readonly exitCode: number;
  constructor(message: string, exitCode = 1, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CliFailure";
    this.exitCode = exitCode;
  }
}

export class UsageError extends CliFailure {
  constructor(message: string) {
    super(message, EXIT_USAGE);
    this.name = "UsageError";
  }
}

/** One line, no stack: the first line of the message, with any RPC error code appended. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const firstLine = (error.message || error.name).split("\n")[0]!.trim();
    const code = (error as { code?: unknown }).code;
    const method = (error as { method?: unknown }).method;
    if (typeof method === "string" && typeof code === "number" && !firstLine.includes(`code ${code}`)) return `${firstLine} (${method}, code ${code})`;
    return firstLine;
  }
  return String(error).split("\n")[0]!;
}
