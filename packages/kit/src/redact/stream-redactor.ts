import type { SecretRedactor } from "./secret-redactor.js";

export interface StreamRedactor {
  push(chunk: string): void;
  /** Writes whatever was held back; call once the stream has ended. */
  flush(): void;
}

/**
 * Redacts a stream of text chunks (live command output, `ctx.execution.log`). Holds back only a
 * tail that could be the start of a secret split across chunks, so output stays live when nothing
 * secret-like is pending.
 */
export function createStreamRedactor(redactor: Pick<SecretRedactor, "redact" | "forms">, write: (text: string) => void): StreamRedactor {
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
