/** Errors of the backend, each with a stable `code` callers (e.g. emulators) map to vendor errors. */

export class SandboxError extends Error {
  override name = "SandboxError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Bad input: names the field and the rule. */
export class SandboxInputError extends SandboxError {
  override name = "SandboxInputError";
  constructor(message: string) {
    super("EINVAL", message);
  }
}

/** The sandbox does not exist (any more), or its jail has ended. */
export class SandboxGoneError extends SandboxError {
  override name = "SandboxGoneError";
  constructor(message: string) {
    super("ENOENT", message);
  }
}

/** The operation needs another state (e.g. exec on a frozen or stopped sandbox). */
export class SandboxStateError extends SandboxError {
  override name = "SandboxStateError";
  constructor(message: string) {
    super("ESTATE", message);
  }
}

export class SandboxExistsError extends SandboxError {
  override name = "SandboxExistsError";
  constructor(message: string) {
    super("EEXIST", message);
  }
}

/** A file op the supervisor refused; `code` is errno-like (ENOENT, EOUTSIDE, ...). */
export class SandboxFileError extends SandboxError {
  override name = "SandboxFileError";
  constructor(
    code: string,
    message: string,
    readonly path: string,
  ) {
    super(code, message);
  }
}

/** An exec the supervisor refused (e.g. ENOENT for a missing cwd or command). */
export class SandboxExecError extends SandboxError {
  override name = "SandboxExecError";
}
