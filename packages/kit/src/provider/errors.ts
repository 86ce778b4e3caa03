import type { Redactor } from "../redact/redactor.js";

/** A hook named a lease that no longer runs (released, destroyed, expired, or never existed). */
export class LeaseGoneError extends Error {
  override name = "LeaseGoneError";
  readonly code = "LEASE_GONE";
}

/** The acquire did not finish within its budget; whatever was created is being destroyed. */
export class AcquireBudgetError extends Error {
  override name = "AcquireBudgetError";
  readonly code = "ACQUIRE_BUDGET_EXCEEDED";
}

/** A stopped sandbox did not start within the budget of the call that needed it (a resume, a command). */
export class StartBudgetError extends Error {
  override name = "StartBudgetError";
  readonly code = "START_BUDGET_EXCEEDED";
}

/** Collects the secret values of a config (secret-ref fields, plus any the provider adds). */
export function secretValuesOf(config: unknown, paths: readonly string[]): string[] {
  const values: string[] = [];
  for (const dotted of paths) {
    let node: unknown = config;
    for (const key of dotted.split(".")) node = node !== null && typeof node === "object" ? (node as Record<string, unknown>)[key] : undefined;
    if (typeof node === "string" && node.length > 0) values.push(node);
  }
  return values;
}

/**
 * The error a hook throws to the host, with every secret of the config removed from its message
 * (and nothing else kept: vendor error objects may carry request headers).
 */
export function redactedError(error: unknown, redact: Redactor): Error {
  const message = error instanceof Error ? error.message : String(error);
  const clean = new Error(redact(message));
  clean.name = error instanceof Error ? error.name : "Error";
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") Object.assign(clean, { code });
  return clean;
}
