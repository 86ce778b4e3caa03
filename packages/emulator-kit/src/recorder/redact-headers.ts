/** Header names whose values are always withheld from records (compared lower-case). */
export const SECRET_HEADER_NAMES: readonly string[] = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "x-access-token"];

// Vendors invent their own credential headers (x-modal-token-secret, X-Daytona-Organization-ID is not
// secret but x-exedev-authorization is); any name that looks like a credential is withheld too.
const SECRET_NAME_PATTERN = /(auth|token|secret|key|password|passwd|cookie|signature|credential|session)/i;

export const REDACTED = "[redacted]";

export type HeaderValues = Record<string, string | string[] | undefined>;

/**
 * Copies headers with credential values replaced by {@link REDACTED}. `extraSecretNames` adds an
 * emulator's own names. Pseudo-headers (`:path`) are dropped: the route is recorded separately.
 */
export function redactHeaders(headers: HeaderValues, extraSecretNames: readonly string[] = []): Record<string, string> {
  const extra = new Set(extraSecretNames.map((name) => name.toLowerCase()));
  const out: Record<string, string> = {};
  for (const [rawName, value] of Object.entries(headers)) {
    if (value === undefined || rawName.startsWith(":")) continue;
    const name = rawName.toLowerCase();
    const secret = SECRET_HEADER_NAMES.includes(name) || extra.has(name) || SECRET_NAME_PATTERN.test(name);
    out[name] = secret ? REDACTED : Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}
