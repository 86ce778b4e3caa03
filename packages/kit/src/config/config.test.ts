import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError, defineProviderConfig, fields, mutuallyExclusive, secretFieldPaths } from "./index.js";

const config = defineProviderConfig(
  mutuallyExclusive(
    z.object({
      apiKey: fields.secretRef().optional(),
      token: fields.secretRef().optional(),
      apiUrl: fields.url().default("https://api.example.com"),
      timeoutMs: fields.timeoutMs({ default: 300_000 }),
      workdir: fields.absolutePosixPath().optional(),
      cpus: fields.positiveInt({ max: 16, default: 2 }),
      auth: z.object({ password: fields.secretRef() }).optional(),
    }),
    ["apiKey", "token"],
  ),
  { warnings: (cfg) => (cfg.cpus > 8 ? ["cpus above 8 is billed at a higher rate"] : []) },
);

describe("defineProviderConfig", () => {
  it("applies defaults and reports ok for a minimal config", () => {
    expect(config.validate({})).toEqual({
      ok: true,
      errors: [],
      warnings: [],
      normalizedConfig: { apiUrl: "https://api.example.com", timeoutMs: 300_000, cpus: 2 },
    });
  });

  it("names the field and the rule in each error", () => {
    const result = config.validate({ timeoutMs: 86_400_001, cpus: 0 });
    expect(result.ok).toBe(false);
    expect(result.errors).toEqual(["timeoutMs: must be at most 86400000", "cpus: must be at least 1"]);
  });

  it("reports type errors and missing nested fields", () => {
    expect(config.validate({ timeoutMs: "soon", auth: {} }).errors).toEqual([
      "timeoutMs: must be a number",
      "auth.password: is required",
    ]);
  });

  it("rejects unknown keys but strips the host envelope keys", () => {
    expect(config.validate({ imgae: "x" }).errors).toEqual(["imgae: unknown field (not accepted by this provider)"]);
    const result = config.validate({ provider: "fake", driver: "sandbox" });
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).not.toHaveProperty("provider");
    expect(result.normalizedConfig).not.toHaveProperty("driver");
  });

  it("keeps the keys the host itself reads in normalizedConfig", () => {
    const result = config.validate({ cpus: 2, runnerLifecycleMode: "warm", runnerIdleTimeoutMs: 60_000, archiveOnRelease: false });
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).toMatchObject({ cpus: 2, runnerLifecycleMode: "warm", runnerIdleTimeoutMs: 60_000, archiveOnRelease: false });
  });

  it("rejects non-object configs", () => {
    expect(config.validate(null).errors).toEqual(["config must be an object"]);
    expect(config.validate([]).ok).toBe(false);
  });

  it("returns warnings from the provider for a valid config", () => {
    expect(config.validate({ cpus: 12 }).warnings).toEqual(["cpus above 8 is billed at a higher rate"]);
  });

  it("enforces mutually exclusive fields", () => {
    expect(config.validate({ apiKey: "a", token: "b" }).errors).toEqual(["apiKey and token cannot both be set"]);
    expect(config.validate({ apiKey: "a" }).ok).toBe(true);
  });

  it("parse (runtime hooks) ignores keys the host merged in, checks known ones, throws ConfigError", () => {
    // After acquire the host sends the saved config merged with lease metadata.
    expect(config.parse({ cpus: 3, fingerprint: "abc", reusable: true, egress: {} })).not.toHaveProperty("fingerprint");
    expect(config.parse({ cpus: 3, fingerprint: "abc" }).cpus).toBe(3);
    try {
      config.parse({ cpus: 99, extra: 1 });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).code).toBe("CONFIG_INVALID");
      expect((error as ConfigError).message).not.toContain("extra");
      expect((error as ConfigError).message).toContain("cpus: must be at most 16");
    }
  });

  it("emits an input JSON Schema where defaulted fields are optional and secrets are marked", () => {
    const schema = config.jsonSchema as { required?: string[]; properties: Record<string, Record<string, unknown>> };
    expect(schema.required ?? []).toEqual([]);
    expect(schema.properties.apiKey?.format).toBe("secret-ref");
    expect(schema.properties.timeoutMs).toMatchObject({ default: 300_000, maximum: 86_400_000 });
    expect(secretFieldPaths(config.jsonSchema).sort()).toEqual(["apiKey", "auth.password", "token"]);
  });
});

describe("fields", () => {
  const check = (schema: z.ZodType, value: unknown) => {
    const result = defineProviderConfig(z.object({ v: schema })).validate({ v: value });
    return result.ok ? { ok: true as const, value: result.normalizedConfig?.v } : { ok: false as const, errors: result.errors };
  };

  it("timeoutMs requires an integer within bounds", () => {
    expect(check(fields.timeoutMs({ min: 100, max: 1000 }), 99)).toEqual({ ok: false, errors: ["v: must be at least 100"] });
    expect(check(fields.timeoutMs(), 1.5)).toEqual({ ok: false, errors: ["v: must be an integer"] });
    expect(check(fields.timeoutMs(), 86_400_000)).toEqual({ ok: true, value: 86_400_000 });
  });

  it("absolutePosixPath normalizes and refuses relative, NUL and '..' paths", () => {
    expect(check(fields.absolutePosixPath(), "/srv//work/./a/")).toEqual({ ok: true, value: "/srv/work/a" });
    expect(check(fields.absolutePosixPath(), "/")).toEqual({ ok: true, value: "/" });
    expect(check(fields.absolutePosixPath(), "srv/work").ok).toBe(false);
    expect(check(fields.absolutePosixPath(), "/srv/../etc")).toEqual({ ok: false, errors: ["v: must not contain '..' segments"] });
    expect(check(fields.absolutePosixPath(), "/srv/\0x")).toEqual({ ok: false, errors: ["v: must not contain a NUL byte"] });
  });

  it("url accepts https and loopback http only, without userinfo", () => {
    for (const ok of ["https://api.example.com/v1", "http://localhost:8080", "http://127.1.2.3", "http://[::1]:9000/x"]) {
      expect(check(fields.url(), ok), ok).toEqual({ ok: true, value: ok });
    }
    expect(check(fields.url(), "http://example.com").ok).toBe(false);
    expect(check(fields.url({ allowLoopbackHttp: false }), "http://localhost").ok).toBe(false);
    expect(check(fields.url(), "https://user:pw@example.com")).toEqual({
      ok: false,
      errors: ["v: must not contain credentials (user:password@); use a secret field"],
    });
    expect(check(fields.url(), "ftp://example.com").ok).toBe(false);
    expect(check(fields.url(), "not a url").ok).toBe(false);
  });

  it("secretRef refuses the empty string", () => {
    expect(check(fields.secretRef(), "")).toEqual({ ok: false, errors: ["v: must not be empty"] });
  });
});
