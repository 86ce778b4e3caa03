import { REDACTED, type Redactor } from "../redact/index.js";

/** Longest vendor text kept in an error: enough to explain, short enough for a log line. */
export const MAX_DETAIL_CHARS = 500;

// Credentials a vendor may echo that the provider never registered (a token it minted, a key from
// another header): masked by shape, after the registered secrets are removed. A value must hold a
// digit and be 8+ characters, so words ("token: expired") stay readable.
const CREDENTIAL_SHAPES: Array<[RegExp, string]> = [
  [/\b(Bearer|Basic|Token|Digest)\s+(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}/gi, `$1 ${REDACTED}`],
  [/\b([\w-]*(?:token|secret|password|passwd|api[-_]?key|access[-_]?key|signature)[\w-]*["']?\s*[:=]\s*["']?)(?=[^\s"'&,;}]*\d)[^\s"'&,;}]{8,}/gi, `$1${REDACTED}`],
  [/(\/\/[^/\s:@]+:)[^/\s@]+@/g, `$1${REDACTED}@`],
];

/**
 * Makes vendor-supplied text safe for an error or a log line: registered secrets removed, other
 * credential-shaped substrings masked, whitespace collapsed, at most `maxChars` characters.
 */
export function vendorText(raw: string, redact: Redactor, maxChars = MAX_DETAIL_CHARS): string {
  let text = redact(raw);
  for (const [shape, replacement] of CREDENTIAL_SHAPES) text = text.replace(shape, replacement);
  text = text.replace(/\s+/g, " ").trim();
  return text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
}
