import type { z } from "zod";

/** Thrown by `parse` when a provider config does not validate; `errors` are the same strings `validate` returns. */
export class ConfigError extends Error {
  readonly code = "CONFIG_INVALID";
  constructor(readonly errors: string[]) {
    super(`Invalid provider config: ${errors.join("; ")}`);
    this.name = "ConfigError";
  }
}

type ZodIssue = z.core.$ZodRawIssue;

/**
 * Per-parse error map: turns zod's generic messages into "<rule>" phrases an operator can act on.
 * Messages set explicitly on a schema (e.g. by field helpers or refinements) take precedence.
 */
export function describeIssue(issue: ZodIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return issue.input === undefined ? "is required" : `must be ${article(String(issue.expected))}`;
    case "too_big": {
      const bound = String(issue.maximum);
      if (issue.origin === "string") return `must be at most ${bound} characters`;
      if (issue.origin === "array") return `must have at most ${bound} items`;
      return issue.inclusive === false ? `must be less than ${bound}` : `must be at most ${bound}`;
    }
    case "too_small": {
      const bound = String(issue.minimum);
      if (issue.origin === "string") return Number(issue.minimum) === 1 ? "must not be empty" : `must be at least ${bound} characters`;
      if (issue.origin === "array") return `must have at least ${bound} items`;
      return issue.inclusive === false ? `must be greater than ${bound}` : `must be at least ${bound}`;
    }
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_format":
      return `must be a valid ${issue.format}`;
    case "not_multiple_of":
      return `must be a multiple of ${String(issue.divisor)}`;
    default:
      return undefined;
  }
}

function article(expected: string): string {
  if (expected === "int") return "an integer";
  return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
}

/** "<field>: <rule>"; `field` is a label (a title, or a path of keys), empty for a config-wide rule. */
export function formatIssue(field: string | readonly PropertyKey[], message: string): string {
  const label = typeof field === "string" ? field : field.map(String).join(".");
  return label === "" ? message : `${label}: ${message}`;
}

/** Every error in one line: the host shows only the first error string it gets. */
export function joinErrors(errors: readonly string[]): string {
  if (errors.length === 0) return "invalid config";
  return errors.length === 1 ? errors[0]! : `${errors.length} problems: ${errors.join("; ")}`;
}
