import { HttpError } from "./errors.js";

export interface IntOptions {
  min?: number;
  max?: number;
  default?: number;
}

/** An integer query parameter, or 400 naming the parameter and the rule. */
export function queryInt(query: URLSearchParams, name: string, options: IntOptions = {}): number | undefined {
  const raw = query.get(name);
  if (raw === null || raw === "") return options.default;
  const value = Number(raw);
  const min = options.min ?? Number.MIN_SAFE_INTEGER;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  if (!/^-?\d+$/.test(raw) || value < min || value > max) {
    throw new HttpError(400, `query parameter ${name}: must be an integer within ${min}..${max} (got ${JSON.stringify(raw)})`, {
      code: "invalid_argument",
    });
  }
  return value;
}

/** A list parameter: repeated (`?s=a&s=b`) and/or comma-joined (`?s=a,b`), empty items dropped. */
export function queryList(query: URLSearchParams, name: string): string[] {
  return query
    .getAll(name)
    .flatMap((value) => value.split(","))
    .map((value) => value.trim())
    .filter((value) => value !== "");
}

export function queryBool(query: URLSearchParams, name: string, fallback = false): boolean {
  const raw = query.get(name);
  if (raw === null || raw === "") return fallback;
  if (raw === "true" || raw === "1") return true;
  if (raw === "false" || raw === "0") return false;
  throw new HttpError(400, `query parameter ${name}: must be true or false (got ${JSON.stringify(raw)})`, { code: "invalid_argument" });
}
