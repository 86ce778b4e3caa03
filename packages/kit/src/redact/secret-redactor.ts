import { isSecretLookingKey } from "./secret-keys.js";
import { redactDeep } from "./redact-deep.js";
import { createRedactor, MIN_SECRET_LENGTH, REDACTED } from "./redactor.js";

/** A redactor that learns secrets as they become known (flags, resolved references, minted tokens). */
export interface SecretRedactor {
  /** Registers a secret value; later calls redact it. */
  add(secret: string): void;
  redact(text: string): string;
  /** Deep copy of a JSON-like value with every string redacted and secret-named fields masked. */
  redactDeep<T>(value: T): T;
  /** The plain forms of the registered secrets, longest first (used by the stream redactor). */
  readonly forms: readonly string[];
}

/**
 * Matching (plain, URL-encoded, base64 at any alignment, Basic auth) is `createRedactor`'s; this adds
 * registration after creation and, for whole values, an exact match that also catches secrets
 * shorter than `MIN_SECRET_LENGTH`.
 */
export function createSecretRedactor(initial: Iterable<string> = []): SecretRedactor {
  const exact = new Set<string>();
  let matcher: (text: string) => string = (text) => text;
  let forms: string[] = [];
  const wholeValue = (text: string) => (exact.has(text) ? REDACTED : matcher(text));
  const redactor: SecretRedactor = {
    add(secret: string) {
      if (typeof secret !== "string" || !secret || exact.has(secret)) return;
      exact.add(secret);
      matcher = createRedactor(exact);
      forms = [...new Set([...exact].flatMap((s) => [s, encodeURIComponent(s)]))].filter((f) => f.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
    },
    redact: (text) => matcher(text),
    redactDeep: <T>(value: T) => redactDeep(value, wholeValue, { maskKey: isSecretLookingKey }),
    get forms() {
      return forms;
    },
  };
  for (const secret of initial) redactor.add(secret);
  return redactor;
}
