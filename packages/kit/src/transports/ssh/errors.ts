/** Why an SSH transport call failed, from OpenSSH's own words. */
export type SshFailureCode =
  /** The server presented a key other than the one recorded (or pinned) for it: refused, never re-accepted. */
  | "host_key_changed"
  /** Pinned host keys are configured and none matches this server. */
  | "host_key_unknown"
  /** The server refused the key (not registered for the account, or the wrong user). */
  | "auth_failed"
  /** No TCP connection (refused, timed out, no route, unknown host). */
  | "connect_failed"
  /** The connection dropped: the command's outcome is unknown. */
  | "connection_lost"
  /** The server refused another session on the connection (e.g. sshd's MaxSessions). */
  | "session_refused"
  /** ssh could not read the private key file. */
  | "key_unreadable"
  /** No `ssh` binary. */
  | "ssh_missing"
  | "unknown";

/** A transport failure of an SSH connection: a rejection of `ScriptRunner.run`, never a command's exit. */
export class SshTransportError extends Error {
  override readonly name = "SshTransportError";
  constructor(
    readonly code: SshFailureCode,
    message: string,
    /** The tail of ssh's own stderr (no secrets: ssh never prints key material). */
    readonly detail = "",
  ) {
    super(message);
  }
}

export function isSshTransportError(error: unknown): error is SshTransportError {
  return error instanceof Error && error.name === "SshTransportError" && typeof (error as SshTransportError).code === "string";
}

const RULES: Array<[RegExp, SshFailureCode]> = [
  [/REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed|WARNING: POSSIBLE DNS SPOOFING/i, "host_key_changed"],
  [/No \S+ host key is known for|Host key verification failed/i, "host_key_unknown"],
  [/Permission denied \(|Too many authentication failures|Received disconnect from .*: 2: Too many/i, "auth_failed"],
  [/Load key .*: (invalid format|bad permissions|error in libcrypto)|no such identity|UNPROTECTED PRIVATE KEY FILE/i, "key_unreadable"],
  [/open failed: administratively prohibited|Session open refused by peer|session request failed/i, "session_refused"],
  [/connect to host .*: (Connection refused|Connection timed out|No route to host|Network is unreachable)|Could not resolve hostname|Operation timed out/i, "connect_failed"],
  [
    /Connection (closed|reset)|Broken pipe|read from master failed|read header failed|Control socket connect|kex_exchange_identification|Timeout, server .* not responding|client_loop: send disconnect/i,
    "connection_lost",
  ],
];

/** Classifies ssh's stderr; `host_key_changed` wins over the generic verification failure it also prints. */
export function classifySshFailure(stderr: string): SshFailureCode {
  for (const [pattern, code] of RULES) if (pattern.test(stderr)) return code;
  return "unknown";
}

const EXPLANATIONS: Record<SshFailureCode, string> = {
  host_key_changed: "its SSH host key differs from the one recorded when it was first reached, so the connection was refused (a replaced machine, or someone in the middle); nothing was sent",
  host_key_unknown: "its SSH host key matches none of the pinned host keys, so the connection was refused; nothing was sent",
  auth_failed: "the SSH server refused the private key (is it registered with the account, and is the SSH user right?)",
  connect_failed: "no SSH connection could be made",
  connection_lost: "the SSH connection was lost; the command's outcome is unknown (the next command connects again)",
  session_refused: "the SSH server refused another session on the connection",
  key_unreadable: "ssh could not read the private key",
  ssh_missing: "the ssh client (OpenSSH) is not installed on the worker's host",
  unknown: "the SSH transport failed",
};

/** A transport error for `what` (e.g. "exe.dev VM paperclip-a1"), with ssh's last words as detail. */
export function sshFailure(what: string, stderr: string, code = classifySshFailure(stderr)): SshTransportError {
  const tail = lastLines(stderr, 4);
  return new SshTransportError(code, `${what}: ${EXPLANATIONS[code]}${tail ? ` (ssh: ${tail})` : ""}`, tail);
}

function lastLines(text: string, count: number): string {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !/^@+$/.test(line))
    .slice(-count)
    .join(" / ")
    .slice(0, 600);
}
