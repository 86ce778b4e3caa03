import { z } from "zod";
import type { PluginEnvironmentValidationResult } from "@paperclipai/plugin-sdk";
import { ConfigError, describeIssue, formatIssue } from "./errors.js";

/** Keys the host may leave in a provider config; they are dropped rather than rejected. */
export const HOST_ENVELOPE_KEYS: readonly string[] = ["provider", "driver"];

export interface ProviderConfigOptions<T> {
  /** Non-fatal remarks about a valid config (shown to the operator, config still saved). */
  warnings?: (config: T) => string[];
}

export interface ProviderConfig<S extends z.ZodObject> {
  schema: S;
  jsonSchema: Record<string, unknown>;
  validate(raw: unknown): PluginEnvironmentValidationResult;
  parse(raw: unknown): z.output<S>;
}

export function defineProviderConfig<S extends z.ZodObject>(
  schema: S,
  opts: ProviderConfigOptions<z.output<S>> = {},
): ProviderConfig<S> {
  // io "input": fields with defaults are optional for the operator.
  const jsonSchema = z.toJSONSchema(schema, { io: "input", target: "draft-07" }) as Record<string, unknown>;
  const knownKeys = new Set(Object.keys(schema.shape));

  function check(raw: unknown): { ok: true; config: z.output<S> } | { ok: false; errors: string[] } {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      return { ok: false, errors: ["config must be an object"] };
    }
    const input: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
    for (const key of HOST_ENVELOPE_KEYS) if (!knownKeys.has(key)) delete input[key];
    const unknownKeyErrors = Object.keys(input)
      .filter((key) => !knownKeys.has(key))
      .map((key) => formatIssue([key], "unknown field (not accepted by this provider)"));

    const result = schema.safeParse(input, { error: (issue) => describeIssue(issue) });
    const errors = [...unknownKeyErrors, ...(result.success ? [] : result.error.issues.map((i) => formatIssue(i.path, i.message)))];
    if (errors.length > 0 || !result.success) return { ok: false, errors };
    return { ok: true, config: result.data };
  }

  return {
    schema,
    jsonSchema,
    validate(raw) {
      const outcome = check(raw);
      if (!outcome.ok) return { ok: false, errors: outcome.errors, warnings: [] };
      return {
        ok: true,
        errors: [],
        warnings: opts.warnings?.(outcome.config) ?? [],
        normalizedConfig: outcome.config as Record<string, unknown>,
      };
    },
    parse(raw) {
      const outcome = check(raw);
      if (!outcome.ok) throw new ConfigError(outcome.errors);
      return outcome.config;
    },
  };
}

/** Rejects configs that set both keys (a value of `undefined` or `null` counts as unset). */
export function mutuallyExclusive<S extends z.ZodObject>(
  schema: S,
  keys: readonly [keyof z.output<S> & string, keyof z.output<S> & string],
): S {
  const [first, second] = keys;
  return schema.superRefine((value, ctx) => {
    const record = value as Record<string, unknown>;
    if (record[first] != null && record[second] != null) {
      ctx.addIssue({ code: "custom", message: `${first} and ${second} cannot both be set` });
    }
  }) as S;
}
