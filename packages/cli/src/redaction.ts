import { createRedactor as createKitRedactor, MIN_SECRET_LENGTH, REDACTED as KIT_REDACTED } from "@paperclip-sandbox/kit";

/**
 * Secret redaction for everything the CLI prints or stores: messages, reports, the lease database.
 * Matching (plain, URL-encoded, base64 at any alignment, Basic auth) is the kit's `createRedactor`;
 * this adds secrets as they become known, masks secret-looking keys in objects, and streams.
 */
export const REDACTED = KIT_REDACTED;

export interface Redactor {
  /** Registers a secret value; later calls redact it. */
  add(secret: string): void;
  redact(text: string): string;
  /** Deep copy of a JSON-like value with every string redacted and secret-named fields masked. */
  redactDeep<T>(value: T): T;
  /** The plain forms of the registered secrets, longest first (used by the stream redactor). */
  readonly forms: readonly string[];
}

const SECRET_KEY_PATTERN = /(secret|token|password|passwd|api[-_]?key|private[-_]?key|credential|authorization)/i;

export function isSecretLookingKey(key: string): boolean {
  return SECRET_KEY_PATTERN.test(key);
}

export function createRedactor(initial: Iterable<string> = []): Redactor {
  const exact = new Set<string>();
  let kitRedact: (text: string) => string = (text) => text;
  let forms: string[] = [];

  const redactDeep = (value: unknown, key?: string): unknown => {
    if (typeof value === "string") {
      if (exact.has(value) || (key !== undefined && isSecretLookingKey(key) && value.length > 0)) return REDACTED;
      return kitRedact(value);
    }
    if (Array.isArray(value)) return value.map((item) => redactDeep(item));
    if (value && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v, k);
      return out;
    }
    return value;
  };

  const redactor: Redactor = {
    add(secret: string) {
      if (!secret || exact.has(secret)) return;
      exact.add(secret);
      kitRedact = createKitRedactor(exact);
      forms = [...new Set([...exact].flatMap((s) => [s, encodeURIComponent(s)]))].filter((f) => f.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
    },
    redact: (text) => kitRedact(text),
    redactDeep: <T>(value: T) => redactDeep(value) as T,
    get forms() {
      return forms;
    },
  };
  for (const secret of initial) redactor.add(secret);
  return redactor;
}

/**
 * Redacts a stream of text chunks (live command output). Holds back only a tail that could be the
 * start of a secret split across chunks, so output stays live when nothing secret-like is pending.
 */
export function createStreamRedactor(redactor: Redactor, write: (text: string) => void) {
  let pending = "";
  const heldTailLength = (text: string): number => {
    let keep = 0;
    for (const form of redactor.forms) {
      const max = Math.min(form.length - 1, text.length);
      for (let len = max; len > keep; len--) {
        if (form.startsWith(text.slice(text.length - len))) {
          keep = len;
          break;
        }
      }
    }
    return keep;
  };
  return {
    push(chunk: string) {
      const text = pending + chunk;
      if (redactor.forms.length === 0) {
        pending = "";
        if (text) write(text);
        return;
      }
      const redacted = redactor.redact(text);
      const keep = heldTailLength(redacted);
      pending = redacted.slice(redacted.length - keep);
      const out = redacted.slice(0, redacted.length - keep);
      if (out) write(out);
    },
    flush() {
      if (pending) write(redactor.redact(pending));
      pending = "";
    },
  };
}
