import { REDACTED, type Redactor } from "./redactor.js";

export interface RedactDeepOptions {
  /** Non-empty string values under a key this accepts become [REDACTED] whatever they hold. */
  maskKey?: (key: string) => boolean;
}

/**
 * Applies a redactor to every string in a JSON-like value (object keys included); returns a copy.
 * With `maskKey`, values under secret-named keys are masked even when the redactor does not know them.
 */
export function redactDeep<T>(value: T, redactor: Redactor, options: RedactDeepOptions = {}): T {
  return walk(value, redactor, options.maskKey, new WeakMap(), false) as T;
}

function walk(value: unknown, redactor: Redactor, maskKey: RedactDeepOptions["maskKey"], seen: WeakMap<object, unknown>, masked: boolean): unknown {
  if (typeof value === "string") return masked && value.length > 0 ? REDACTED : redactor(value);
  if (value === null || typeof value !== "object") return value;
  if (seen.has(value)) return seen.get(value);
  if (Array.isArray(value)) {
    const copy: unknown[] = [];
    seen.set(value, copy);
    for (const item of value) copy.push(walk(item, redactor, maskKey, seen, masked)); // a list under a secret key is secret too
    return copy;
  }
  if (value instanceof Error) {
    const copy = new Error(redactor(value.message));
    copy.name = value.name;
    seen.set(value, copy);
    return copy;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value; // Buffers, Dates, class instances: left as they are
  const copy: Record<string, unknown> = {};
  seen.set(value, copy);
  for (const [key, child] of Object.entries(value)) {
    copy[redactor(key)] = walk(child, redactor, maskKey, seen, maskKey?.(key) === true);
  }
  return copy;
}
