import { posix } from "node:path";
import { z } from "zod";

export const DEFAULT_MAX_TIMEOUT_MS = 86_400_000;

interface BoundedIntOptions {
  min?: number;
  max?: number;
}

function boundedInt(min: number, max: number): z.ZodNumber {
  return z.number().int({ error: "must be an integer" }).min(min).max(max);
}

function timeoutMs(opts: BoundedIntOptions & { default: number }): z.ZodDefault<z.ZodNumber>;
function timeoutMs(opts?: BoundedIntOptions): z.ZodNumber;
function timeoutMs(opts: BoundedIntOptions & { default?: number } = {}): z.ZodNumber | z.ZodDefault<z.ZodNumber> {
  const schema = boundedInt(opts.min ?? 1, opts.max ?? DEFAULT_MAX_TIMEOUT_MS).describe("Milliseconds");
  return opts.default === undefined ? schema : schema.default(opts.default);
}

function positiveInt(opts: BoundedIntOptions & { default: number }): z.ZodDefault<z.ZodNumber>;
function positiveInt(opts?: BoundedIntOptions): z.ZodNumber;
function positiveInt(opts: BoundedIntOptions & { default?: number } = {}): z.ZodNumber | z.ZodDefault<z.ZodNumber> {
  const schema = boundedInt(opts.min ?? 1, opts.max ?? Number.MAX_SAFE_INTEGER);
  return opts.default === undefined ? schema : schema.default(opts.default);
}

/** An absolute POSIX path inside a sandbox, normalized (no `//`, no `.` segments, no trailing slash). */
function absolutePosixPath() {
  return z
    .string()
    .superRefine((value, ctx) => {
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

/** https URLs only; plain http is accepted for loopback hosts (local development) unless disabled. */
function url(opts: { allowLoopbackHttp?: boolean } = {}) {
  const allowLoopbackHttp = opts.allowLoopbackHttp ?? true;
  return z.string().superRefine((value, ctx) => {
    const problem = urlProblem(value, allowLoopbackHttp);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
}

function urlProblem(value: string, allowLoopbackHttp: boolean): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return "must be an absolute URL";
  }
  if (parsed.username || parsed.password) return "must not contain credentials (user:password@); use a secret field";
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

/** A secret value; the host stores it as a company secret because the JSON Schema says `format: "secret-ref"`. */
function secretRef() {
  return z.string().min(1, { error: "must not be empty" }).meta({ format: SECRET_REF_FORMAT });
}

export const fields = { timeoutMs, positiveInt, absolutePosixPath, url, secretRef };
