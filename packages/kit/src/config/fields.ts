import { posix } from "node:path";
import { z } from "zod";
import { isDigestTemplateName, isOwnedTemplateName, TEMPLATE_NAME_PATTERN } from "../provider/template-names.js";
import { FIELD_MAX_ITEMS, FIELD_MAX_LENGTH, type FieldUi, withUi } from "./ui.js";

export const DEFAULT_MAX_TIMEOUT_MS = 86_400_000;

interface BoundedIntOptions extends FieldUi {
  min?: number;
  max?: number;
}

function boundedInt(min: number, max: number): z.ZodNumber {
  return z.number().int({ error: "must be an integer" }).min(min).max(max);
}

/** Milliseconds; the title gets the unit "ms". */
function timeoutMs(opts: BoundedIntOptions & { default: number }): z.ZodDefault<z.ZodNumber>;
function timeoutMs(opts?: BoundedIntOptions): z.ZodNumber;
function timeoutMs(opts: BoundedIntOptions & { default?: number } = {}): z.ZodNumber | z.ZodDefault<z.ZodNumber> {
  const schema = withUi(boundedInt(opts.min ?? 1, opts.max ?? DEFAULT_MAX_TIMEOUT_MS), { unit: "ms", ...opts });
  return opts.default === undefined ? schema : schema.default(opts.default);
}

/** A whole number within bounds; say the unit (`unit: "MiB"`) when it has one. */
function positiveInt(opts: BoundedIntOptions & { default: number }): z.ZodDefault<z.ZodNumber>;
function positiveInt(opts?: BoundedIntOptions): z.ZodNumber;
function positiveInt(opts: BoundedIntOptions & { default?: number } = {}): z.ZodNumber | z.ZodDefault<z.ZodNumber> {
  const schema = withUi(boundedInt(opts.min ?? 1, opts.max ?? Number.MAX_SAFE_INTEGER), opts);
  return opts.default === undefined ? schema : schema.default(opts.default);
}

/** An absolute POSIX path inside a sandbox, normalized (no `//`, no `.` segments, no trailing slash). */
function absolutePosixPath(ui: FieldUi = {}) {
  // The keywords go on the string itself: the JSON Schema of a transform's input drops examples.
  return withUi(z.string().max(FIELD_MAX_LENGTH.path), ui)
    .superRefine((value, ctx) => {
      if (value.length > FIELD_MAX_LENGTH.path) return;
      const problem = posixPathProblem(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    })
    .transform(normalizePosixPath);
}

function posixPathProblem(value: string): string | undefined {
  if (value.includes("\0")) return "must not contain a NUL byte";
  if (!value.startsWith("/")) return "must be an absolute POSIX path (starting with /)";
  if (value.split("/").includes("..")) return "must not contain '..' segments";
  return undefined;
}

function normalizePosixPath(value: string): string {
  const normalized = posix.normalize(value);
  return normalized.length > 1 && normalized.endsWith("/") ? normalized.slice(0, -1) : normalized;
}

/**
 * An endpoint URL: https only (plain http is accepted for loopback hosts, local development, unless
 * disabled), with no credentials in it: no user:password@, and no query or fragment (where tokens
 * ride: `?token=...`), which an endpoint never needs. So the URL can be shown anywhere.
 */
function url(opts: FieldUi & { allowLoopbackHttp?: boolean } = {}) {
  const allowLoopbackHttp = opts.allowLoopbackHttp ?? true;
  return withUi(
    z
      .string()
      .max(FIELD_MAX_LENGTH.url)
      .superRefine((value, ctx) => {
        if (value.length > FIELD_MAX_LENGTH.url) return;
        const problem = urlProblem(value, allowLoopbackHttp);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
    opts,
  );
}

function urlProblem(value: string, allowLoopbackHttp: boolean): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return "must be an absolute URL";
  }
  if (parsed.username || parsed.password) return "must not contain credentials (user:password@); use a secret field";
  // Checked on the text too: the URL parser drops an empty "?" or "#".
  if (parsed.search || parsed.hash || /[?#]/.test(value)) return "must not have a query (?...) or fragment (#...): an endpoint needs none, and credentials belong in a secret field";
  if (parsed.protocol === "https:") return undefined;
  if (parsed.protocol === "http:" && allowLoopbackHttp) {
    return isLoopbackHost(parsed.hostname) ? undefined : "must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)";
  }
  return "must use https";
}

function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === "localhost" || host === "[::1]") return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

export const SECRET_REF_FORMAT = "secret-ref";

interface SecretRefOptions extends FieldUi {
  /** The worker environment variable used when the field is unset or blank (see `resolveSecretRef`). */
  envFallback?: string;
  /** Longest value; default `FIELD_MAX_LENGTH.secret` (a token or key), `FIELD_MAX_LENGTH.document` for a whole file. */
  maxLength?: number;
}

/**
 * A secret value; the host stores it as a company secret because the JSON Schema says `format: "secret-ref"`.
 * With `envFallback` the field is optional and its description says which variable stands in for it.
 */
function secretRef(opts: SecretRefOptions & { envFallback: string }): z.ZodOptional<z.ZodString>;
function secretRef(opts?: SecretRefOptions): z.ZodString;
function secretRef(opts: SecretRefOptions = {}): z.ZodString | z.ZodOptional<z.ZodString> {
  const fallback = opts.envFallback
    ? `Leave empty to use the ${opts.envFallback} environment variable of the plugin worker (the host forwards such credential variables only to the provider packages it trusts).`
    : undefined;
  const description = [opts.description, fallback].filter(Boolean).join(" ") || undefined;
  const text = z
    .string()
    .min(1, { error: "must not be empty" })
    .max(opts.maxLength ?? FIELD_MAX_LENGTH.secret);
  const schema = withUi(text.meta({ format: SECRET_REF_FORMAT }), { ...opts, description });
  return opts.envFallback ? schema.optional() : schema;
}

/**
 * The secret a provider uses: the config value (the host has already resolved a secret reference to
 * its value), or, when that is unset or blank, the `envFallback` variable of the worker's environment.
 * Undefined when neither is set.
 */
export function resolveSecretRef(value: string | undefined, envFallback: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (value !== undefined && value.trim() !== "") return value;
  const fromEnv = env[envFallback];
  return fromEnv !== undefined && fromEnv.trim() !== "" ? fromEnv : undefined;
}

interface StringListOptions extends FieldUi {
  /** The rule for one item: a problem phrase ("must be a host name"), or undefined when the item is fine. */
  item?: (value: string) => string | undefined;
  /** Longest item; default `FIELD_MAX_LENGTH.listItem`. */
  maxItemLength?: number;
  /** Most items; default `FIELD_MAX_ITEMS`. */
  maxItems?: number;
  /** Example items (`items.examples`); say them in the description too, the host's form shows none for text. */
  itemExamples?: readonly string[];
}

/**
 * A list of strings, empty by default, each item trimmed and checked by `item`. The item rule runs on the
 * server only, never as an item `pattern`: the host's form checks item patterns but shows no item errors,
 * so a bad item would disable its buttons silently. The server's error names the list and the item.
 */
function stringList(opts: StringListOptions = {}) {
  const check = opts.item;
  const maxItemLength = opts.maxItemLength ?? FIELD_MAX_LENGTH.listItem;
  const item = z
    .string()
    .trim()
    .superRefine((value, ctx) => {
      // The item bound is a rule of its own, not maxLength: the host's form enforces item keywords silently.
      const problem = value.length > maxItemLength ? `must be at most ${maxItemLength} characters` : check?.(value);
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });
  const list = z.array(opts.itemExamples ? item.meta({ examples: [...opts.itemExamples] }) : item).max(opts.maxItems ?? FIELD_MAX_ITEMS);
  return withUi(list, opts).default([]);
}

/** A yes/no switch with its default. */
function boolean(opts: FieldUi & { default: boolean }) {
  return withUi(z.boolean(), opts).default(opts.default);
}

/** One of fixed values; the host shows a select (with "None" when the field is optional). */
function oneOf<const T extends readonly [string, ...string[]]>(values: T, ui: FieldUi = {}) {
  return withUi(z.enum(values), ui);
}

/** Why a template ref field refuses a value that is no template name (the form `ownedTemplateName` gives). */
const TEMPLATE_REF_RULE = "must be a template Paperclip captured (pc-, 16 hex digits, a dash and 8 more)";

interface TemplateRefOptions extends FieldUi {
  /** Also accept the previous release's `paperclip-tpl-` names, where a provider has read them so far. */
  legacy?: boolean;
  /** The vendor's own rule for the name (exe.dev's VM names): a problem phrase, or undefined when the name fits. */
  vendorRule?: (value: string) => string | undefined;
}

/**
 * The config field naming a custom image Paperclip captured, for vendors whose templates carry their
 * owner in the name (`ownedTemplateName`). The host's form checks the JSON-schema `pattern`; the
 * server checks the exact form, then the vendor's rule, so a refusal names the one rule it broke.
 */
function templateRef(opts: TemplateRefOptions = {}) {
  const { legacy = false, vendorRule, ...ui } = opts;
  const isTemplateName = legacy ? isOwnedTemplateName : isDigestTemplateName;
  const pattern = legacy ? TEMPLATE_NAME_PATTERN.digestOrLegacy : TEMPLATE_NAME_PATTERN.digest;
  const name = z
    .string()
    .max(FIELD_MAX_LENGTH.name)
    .superRefine((value, ctx) => {
      const problem = isTemplateName(value) ? vendorRule?.(value) : TEMPLATE_REF_RULE;
      if (problem) ctx.addIssue({ code: "custom", message: problem });
    });
  return withUi(name.meta({ pattern }), ui);
}

export const RUNNER_LIFECYCLE_MODES = ["inherit", "per_turn", "warm"] as const;

/**
 * The host's own `runnerLifecycleMode` setting (the host reads it from the environment config; the
 * provider only passes it through). Declared so the host's form shows it next to reuseLease: the host
 * reuses a lease only with "warm".
 */
function runnerLifecycleMode(ui: FieldUi = {}) {
  return withUi(z.enum(RUNNER_LIFECYCLE_MODES), {
    title: "Runner lifecycle (Paperclip setting)",
    description:
      'Paperclip\'s own run setting, passed through by the provider. "warm" keeps an issue bound to its execution workspace between runs, which lease reuse needs; "per_turn" starts fresh each run; empty or "inherit" uses Paperclip\'s default.',
    group: "Lease reuse",
    advanced: true,
    ...ui,
  }).optional();
}

/**
 * `reuseLease`: the provider keeps a released lease to resume it. Its description says what the host
 * (2026.916.1) also needs, since the flag alone changes nothing there.
 */
function reuseLease(ui: FieldUi = {}) {
  return boolean({
    default: false,
    title: "Reuse lease",
    description:
      'Keep a released sandbox and resume it for the next run of the same issue. Paperclip reuses it only when Runner lifecycle (under Advanced options) is "warm" and the issue belongs to a project with a workspace; otherwise every run gets a fresh sandbox.',
    group: "Lease reuse",
    ...ui,
  });
}

export const fields = {
  ui: withUi,
  timeoutMs,
  positiveInt,
  absolutePosixPath,
  url,
  secretRef,
  stringList,
  boolean,
  oneOf,
  templateRef,
  runnerLifecycleMode,
  reuseLease,
};
