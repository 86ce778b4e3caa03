import { z } from "zod";
import type { PluginEnvironmentValidationResult } from "@paperclipai/plugin-sdk";
import { ConfigError, describeIssue, formatIssue, joinErrors } from "./errors.js";
import { fieldTitle, labelForPath, originalPath, unsetBlanks, type ItemPositions } from "./schema-walk.js";

/** Keys the host may leave in a provider config; they are dropped rather than rejected. */
export const HOST_ENVELOPE_KEYS: readonly string[] = ["provider", "driver"];

/**
 * Keys the Paperclip host itself reads from a sandbox environment's config (observed with
 * paperclipai 2026.916.1: runner lifecycle settings, and `archiveOnRelease` added to saved probes).
 * Validation keeps them in `normalizedConfig` untouched, since the host persists that object.
 */
export const HOST_OWNED_KEYS: readonly string[] = ["runnerLifecycleMode", "runnerIdleTimeoutMs", "archiveOnRelease"];

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

export function defineProviderConfig<S extends z.ZodObject>(schema: S, opts: ProviderConfigOptions<z.output<S>> = {}): ProviderConfig<S> {
  // io "input": fields with defaults are optional for the operator.
  const jsonSchema = singleLineTextFields(z.toJSONSchema(schema, { io: "input", target: "draft-07" }) as Record<string, unknown>);
  const knownKeys = new Set(Object.keys(schema.shape));

  /**
   * `strict` (validation of an operator's config) rejects unknown keys. Runtime hooks are lenient:
   * the host merges lease metadata and its own keys into the config it sends after acquire, so there
   * unknown keys are ignored while known ones are still checked.
   */
  function check(raw: unknown, strict: boolean): { ok: true; config: z.output<S> } | { ok: false; errors: string[] } {
    if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
      return { ok: false, errors: ["config must be an object"] };
    }
    const input: Record<string, unknown> = {};
    const unknownKeyErrors: string[] = [];
    for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
      if (knownKeys.has(key)) input[key] = value;
      else if (strict && !HOST_ENVELOPE_KEYS.includes(key) && !HOST_OWNED_KEYS.includes(key)) {
        unknownKeyErrors.push(formatIssue([key], "unknown field (not accepted by this provider)"));
      }
    }

    const positions: ItemPositions = new Map();
    const result = schema.safeParse(unsetBlanks(input, schema.shape, positions), { error: (issue) => describeIssue(issue) });
    const label = (path: readonly PropertyKey[]) => labelForPath(schema, originalPath(path, positions), z.globalRegistry);
    const errors = [...unknownKeyErrors, ...(result.success ? [] : result.error.issues.map((i) => formatIssue(label(i.path), i.message)))];
    if (errors.length > 0 || !result.success) return { ok: false, errors };
    return { ok: true, config: result.data };
  }

  return {
    schema,
    jsonSchema,
    validate(raw) {
      const outcome = check(raw, true);
      // The host shows only errors[0] (as the 422 message), so several errors travel as one.
      if (!outcome.ok) return { ok: false, errors: [joinErrors(outcome.errors)], warnings: [] };
      return {
        ok: true,
        errors: [],
        warnings: opts.warnings?.(outcome.config) ?? [],
        normalizedConfig: { ...hostOwnedEntries(raw as Record<string, unknown>, knownKeys), ...(outcome.config as Record<string, unknown>) },
      };
    },
    parse(raw) {
      const outcome = check(raw, false);
      if (!outcome.ok) throw new ConfigError(outcome.errors);
      return outcome.config;
    },
  };
}

/** Host-owned keys the provider's schema does not declare (declared ones come parsed, blank ones unset). */
function hostOwnedEntries(raw: Record<string, unknown>, knownKeys: ReadonlySet<string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(raw).filter(([key]) => HOST_OWNED_KEYS.includes(key) && !knownKeys.has(key)));
}

/** Rejects configs that set both keys (a value of `undefined` or `null` counts as unset). */
export function mutuallyExclusive<S extends z.ZodObject>(schema: S, keys: readonly [keyof z.output<S> & string, keyof z.output<S> & string]): S {
  const [first, second] = keys;
  const name = (key: string) => fieldTitle(schema.shape[key], z.globalRegistry) ?? key;
  return schema.superRefine((value, ctx) => {
    const record = value as Record<string, unknown>;
    if (record[first] != null && record[second] != null) {
      ctx.addIssue({ code: "custom", message: `${name(first)} and ${name(second)} cannot both be set` });
    }
  }) as S;
}

/**
 * The host's form shows a text field with `maxLength` over 200 as a multi-line box (paperclipai
 * 2026.916.1): a longer bound (a URL, a path, an image reference, a secret) stays the server's rule
 * only, recorded as `x-paperclip-max-length`; 200 or less is `maxLength`, which the form checks too.
 */
export const HOST_SINGLE_LINE_MAX_LENGTH = 200;
export const SERVER_MAX_LENGTH_KEYWORD = "x-paperclip-max-length";

function singleLineTextFields(node: Record<string, unknown>): Record<string, unknown> {
  if (typeof node.maxLength === "number" && node.maxLength > HOST_SINGLE_LINE_MAX_LENGTH) {
    node[SERVER_MAX_LENGTH_KEYWORD] = node.maxLength;
    delete node.maxLength;
  }
  for (const key of ["properties", "definitions", "$defs"]) {
    const children = node[key];
    if (children && typeof children === "object") for (const child of Object.values(children)) if (child && typeof child === "object") singleLineTextFields(child as Record<string, unknown>);
  }
  for (const key of ["anyOf", "oneOf", "allOf"]) {
    const options = node[key];
    if (Array.isArray(options)) for (const option of options) if (option && typeof option === "object") singleLineTextFields(option as Record<string, unknown>);
  }
  if (node.items && typeof node.items === "object") singleLineTextFields(node.items as Record<string, unknown>);
  return node;
}
