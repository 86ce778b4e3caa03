import { readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { UsageError } from "./errors.js";

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  format?: string;
  [key: string]: unknown;
};

export type ProviderConfig = Record<string, unknown>;

/** Where a secret comes from; stored in the lease database in place of the value. */
type SecretSource = { env: string } | { file: string };
interface SecretRef {
  $secret: SecretSource;
}

function isSecretRef(value: unknown): value is SecretRef {
  return !!value && typeof value === "object" && "$secret" in (value as object);
}

/** Reads a JSON or YAML config file; it must hold one mapping. */
export function readConfigFile(file: string): ProviderConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new UsageError(`cannot read config file ${file}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
  let parsed: unknown;
  try {
    parsed = path.extname(file).toLowerCase() === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    const detail = (error as Error).message.split("\n")[0];
    throw new UsageError(`config file ${file} is not valid ${path.extname(file) === ".json" ? "JSON" : "YAML/JSON"}: ${detail}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new UsageError(`config file ${file} must hold a mapping of config fields`);
  }
  return parsed as ProviderConfig;
}

function splitAssignment(flag: string, raw: string): [string, string] {
  const eq = raw.indexOf("=");
  if (eq <= 0) throw new UsageError(`${flag} expects key=value, got '${raw}'`);
  return [raw.slice(0, eq).trim(), raw.slice(eq + 1)];
}

function schemaTypes(schema: JsonSchema | undefined): Set<string> {
  const types = new Set<string>();
  if (!schema) return types;
  if (typeof schema.type === "string") types.add(schema.type);
  if (Array.isArray(schema.type)) for (const t of schema.type) types.add(t);
  for (const alt of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) for (const t of schemaTypes(alt)) types.add(t);
  return types;
}

function childSchema(schema: JsonSchema | undefined, key: string): JsonSchema | undefined | null {
  if (!schema) return undefined;
  const candidates = [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])];
  for (const candidate of candidates) {
    const prop = candidate.properties?.[key];
    if (prop) return prop;
  }
  const hasProperties = candidates.some((c) => c.properties && Object.keys(c.properties).length > 0);
  const additional = schema.additionalProperties;
  if (additional && typeof additional === "object") return additional;
  if (hasProperties && additional !== true) return null; // known-closed: the field does not exist
  return undefined; // open schema: no typing information
}

function parseLiteral(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** Converts a `--set` string to the type the schema asks for. */
function coerceValue(key: string, raw: string, schema: JsonSchema | undefined): unknown {
  const types = schemaTypes(schema);
  const bad = (expected: string) => new UsageError(`--set ${key}: expected ${expected}, got '${raw}'`);
  if (types.size === 0) {
    if (schema?.enum) {
      const value = schema.enum.includes(raw) ? raw : parseLiteral(raw);
      if (!schema.enum.includes(value)) throw bad(`one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
      return value;
    }
    return parseLiteral(raw);
  }
  if (types.has("null") && raw === "null") return null;
  if (types.has("boolean")) {
    if (/^(true|yes|on|1)$/i.test(raw)) return true;
    if (/^(false|no|off|0)$/i.test(raw)) return false;
    if (types.size === 1 || (types.size === 2 && types.has("null"))) throw bad("a boolean (true/false)");
  }
  if (types.has("integer")) {
    if (/^-?\d+$/.test(raw.trim())) return Number.parseInt(raw, 10);
    if (!types.has("number") && !types.has("string")) throw bad("an integer");
  }
  if (types.has("number")) {
    const n = Number(raw);
    if (raw.trim() !== "" && Number.isFinite(n)) return n;
    if (!types.has("string")) throw bad("a number");
  }
  if (types.has("array")) {
    if (raw.trim().startsWith("[")) {
      const parsed = parseLiteral(raw);
      if (!Array.isArray(parsed)) throw bad("a JSON array or a comma-separated list");
      return parsed;
    }
    if (!types.has("string")) {
      const items = raw.trim() === "" ? [] : raw.split(",").map((s) => s.trim());
      return items.map((item) => coerceValue(`${key}[]`, item, schema?.items));
    }
  }
  if (types.has("object")) {
    const parsed = parseLiteral(raw);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed;
    if (!types.has("string")) throw bad("a JSON object");
  }
  if (types.has("string")) {
    if (schema?.enum && !schema.enum.includes(raw)) throw bad(`one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
    return raw;
  }
  return parseLiteral(raw);
}

function knownFields(schema: JsonSchema | undefined): string {
  return Object.keys(schema?.properties ?? {})
    .sort()
    .join(", ");
}

/** Sets `a.b.c` in `config`, creating objects on the way. */
function setPath(config: ProviderConfig, keys: string[], value: unknown): void {
  let target: Record<string, unknown> = config;
  for (const key of keys.slice(0, -1)) {
    const next = target[key];
    if (!next || typeof next !== "object" || Array.isArray(next)) target[key] = {};
    target = target[key] as Record<string, unknown>;
  }
  target[keys[keys.length - 1]!] = value;
}

function schemaForPath(schema: JsonSchema | undefined, keys: string[], flag: string): JsonSchema | undefined {
  let current = schema;
  for (let i = 0; i < keys.length; i++) {
    const child = childSchema(current, keys[i]!);
    if (child === null) {
      const where = keys.slice(0, i).join(".");
      throw new UsageError(`${flag} ${keys.join(".")}: unknown config field${where ? ` under '${where}'` : ""} (fields: ${knownFields(current) || "none"})`);
    }
    current = child;
  }
  return current;
}

/** Applies `--set key=value` flags (dotted keys reach nested objects), typed by the manifest's configSchema. */
export function applySetFlags(config: ProviderConfig, sets: string[], schema: JsonSchema | undefined): ProviderConfig {
  const out: ProviderConfig = structuredClone(config);
  for (const raw of sets) {
    const [key, value] = splitAssignment("--set", raw);
    const keys = key.split(".");
    const fieldSchema = schemaForPath(schema, keys, "--set");
    setPath(out, keys, coerceValue(key, value, fieldSchema));
  }
  return out;
}

export interface ResolvedSecrets {
  /** Field path → plaintext value (passed to the provider, never printed or stored). */
  values: Map<string, string>;
  /** Field path → where it came from (stored instead of the value). */
  sources: Map<string, SecretSource>;
}

function readSecretSource(field: string, source: SecretSource, env: NodeJS.ProcessEnv): string {
  if ("env" in source) {
    const value = env[source.env];
    if (value === undefined || value === "") {
      throw new UsageError(`secret '${field}': environment variable ${source.env} is not set`);
    }
    return value;
  }
  let text: string;
  try {
    text = readFileSync(source.file, "utf8");
  } catch (error) {
    throw new UsageError(`secret '${field}': cannot read ${source.file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
  const value = text.replace(/\r?\n$/, "");
  if (value === "") throw new UsageError(`secret '${field}': file ${source.file} is empty`);
  return value;
}

/** Resolves `--secret field=ENV_VAR` and `--secret-file field=PATH` flags. */
export function resolveSecretFlags(secretEnv: string[], secretFiles: string[], schema: JsonSchema | undefined, env: NodeJS.ProcessEnv = process.env, cwd: string = process.cwd()): ResolvedSecrets {
  const values = new Map<string, string>();
  const sources = new Map<string, SecretSource>();
  const add = (flag: string, raw: string, toSource: (v: string) => SecretSource) => {
    const [field, ref] = splitAssignment(flag, raw);
    if (!ref) throw new UsageError(`${flag} ${field}: missing ${flag === "--secret" ? "environment variable name" : "file path"}`);
    schemaForPath(schema, field.split("."), flag);
    const source = toSource(ref);
    values.set(field, readSecretSource(field, source, env));
    sources.set(field, source);
  };
  for (const raw of secretEnv) add("--secret", raw, (name) => ({ env: name }));
  for (const raw of secretFiles) add("--secret-file", raw, (file) => ({ file: path.resolve(cwd, file) }));
  return { values, sources };
}

/** The config with secrets merged in (for the provider). */
export function withSecrets(config: ProviderConfig, secrets: ResolvedSecrets): ProviderConfig {
  const out: ProviderConfig = structuredClone(config);
  for (const [field, value] of secrets.values) setPath(out, field.split("."), value);
  return out;
}

/** The config with secret references in place of secret values (for the lease database). */
export function withSecretRefs(config: ProviderConfig, secrets: ResolvedSecrets): ProviderConfig {
  const out: ProviderConfig = structuredClone(config);
  for (const [field, source] of secrets.sources) setPath(out, field.split("."), { $secret: source } satisfies SecretRef);
  return out;
}

/** Replaces stored secret references by their current values (for `leases gc`). */
export function resolveStoredSecretRefs(config: ProviderConfig, env: NodeJS.ProcessEnv = process.env): { config: ProviderConfig; secrets: string[] } {
  const secrets: string[] = [];
  const walk = (value: unknown, field: string): unknown => {
    if (isSecretRef(value)) {
      const resolved = readSecretSource(field, value.$secret, env);
      secrets.push(resolved);
      return resolved;
    }
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${field}[${i}]`));
    if (value && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, field ? `${field}.${k}` : k)]));
    }
    return value;
  };
  return { config: walk(config, "") as ProviderConfig, secrets };
}

export function getPath(config: ProviderConfig, field: string): unknown {
  let current: unknown = config;
  for (const key of field.split(".")) {
    if (!current || typeof current !== "object") return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
