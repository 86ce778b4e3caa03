import type { Redactor } from "./redactor.js";

/** Applies a redactor to every string in a JSON-like value (object keys included); returns a copy. */
export function redactDeep<T>(value: T, redactor: Redactor): T {
  return walk(value, redactor, new WeakMap()) as T;
}

function walk(value: unknown, redactor: Redactor, seen: WeakMap<object, unknown>): unknown {
  if (typeof value === "string") return redactor(value);
  if (value === null || typeof value !== "object") return value;
  if (seen.has(value)) return seen.get(value);
  if (Array.isArray(value)) {
    const copy: unknown[] = [];
    seen.set(value, copy);
    for (const item of value) copy.push(walk(item, redactor, seen));
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
  for (const [key, child] of Object.entries(value)) copy[redactor(key)] = walk(child, redactor, seen);
  return copy;
}
