import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ownedTemplateName } from "../provider/template-names.js";
import { ConfigError, configSchemaUiProblems, defineProviderConfig, FIELD_MAX_LENGTH, fields, mutuallyExclusive, resolveSecretRef, secretFieldPaths } from "./index.js";

const config = defineProviderConfig(
  mutuallyExclusive(
    z.object({
      apiKey: fields.secretRef({ title: "API key" }).optional(),
      token: fields.secretRef({ title: "Token" }).optional(),
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

  it("names the field and the rule; several errors travel as one message (the host shows errors[0] only)", () => {
    expect(config.validate({ cpus: 0 }).errors).toEqual(["cpus: must be at least 1"]);
    const result = config.validate({ timeoutMs: 86_400_001, cpus: 0 });
    expect(result.ok).toBe(false);
    expect(result.errors).toEqual(["2 problems: timeoutMs: must be at most 86400000; cpus: must be at least 1"]);
  });

  it("reports type errors and missing nested fields", () => {
    expect(config.validate({ timeoutMs: "soon", auth: {} }).errors).toEqual(["2 problems: timeoutMs: must be a number; auth / password: is required"]);
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
    expect(config.validate({ apiKey: "a", token: "b" }).errors).toEqual(["API key and Token cannot both be set"]);
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

  it("url refuses a query or fragment: a token in ?token= would be shown wherever the URL is", () => {
    for (const bad of ["https://api.example.com/?token=s3cr3t", "https://api.example.com/v1?x", "https://api.example.com/#key=s3cr3t", "http://localhost:9000/?"]) {
      expect(check(fields.url(), bad), bad).toEqual({
        ok: false,
        errors: ["v: must not have a query (?...) or fragment (#...): an endpoint needs none, and credentials belong in a secret field"],
      });
    }
  });

  it("a 1 MB string is refused by every text field, naming the bound that fits it", () => {
    const huge = "a".repeat(1_000_000);
    expect(check(fields.ui(z.string().min(1), {}), huge)).toEqual({ ok: false, errors: ["v: must be at most 256 characters"] });
    expect(check(fields.ui(z.string().trim().regex(/^a+$/), {}), huge)).toEqual({ ok: false, errors: ["v: must be at most 256 characters"] });
    expect(check(fields.ui(z.string().max(FIELD_MAX_LENGTH.image), {}), huge)).toEqual({ ok: false, errors: ["v: must be at most 512 characters"] });
    expect(check(fields.url(), `https://example.com/${huge}`)).toEqual({ ok: false, errors: ["v: must be at most 2048 characters"] });
    expect(check(fields.absolutePosixPath(), `/${huge}`)).toEqual({ ok: false, errors: ["v: must be at most 4096 characters"] });
    expect(check(fields.secretRef(), huge)).toEqual({ ok: false, errors: ["v: must be at most 16384 characters"] });
    expect(check(fields.secretRef({ maxLength: FIELD_MAX_LENGTH.document }), huge)).toEqual({ ok: false, errors: ["v: must be at most 262144 characters"] });
    expect(check(fields.stringList(), ["ok", huge]).errors).toEqual(["v, item 2: must be at most 1024 characters"]);
    expect(
      check(
        fields.stringList(),
        Array.from({ length: 300 }, (_, i) => `h${i}`),
      ).errors,
    ).toEqual(["v: must have at most 256 items"]);
    expect(check(fields.ui(z.record(z.string(), z.string()), {}), { a: huge }).errors).toEqual(['v: the value of "a" must be at most 4096 characters']);
    expect(check(fields.ui(z.record(z.string(), z.string()), {}), { [huge]: "x" }).errors?.[0]).toMatch(/^v: key "a{40}"\.\.\. must be at most 317 characters$/);
    // Bounds fit what the field holds: an image reference of 300 characters is fine.
    expect(check(fields.ui(z.string().max(FIELD_MAX_LENGTH.image), {}), "r".repeat(300)).ok).toBe(true);
  });

  it("the bounds are in the JSON Schema: up to 200 characters as maxLength (the host's form checks it and keeps a one-line input), longer ones for the server only", () => {
    const schema = defineProviderConfig(
      z.object({
        short: fields.ui(z.string().max(64), { title: "Short", group: "G" }),
        name: fields.ui(z.string(), { title: "Name", group: "G" }),
        endpoint: fields.url({ title: "Endpoint", group: "G" }),
        hosts: fields.stringList({ title: "Hosts", group: "G" }),
      }),
    ).jsonSchema as { properties: Record<string, Record<string, unknown>> };
    expect(schema.properties.short).toMatchObject({ maxLength: 64 });
    expect(schema.properties.name).not.toHaveProperty("maxLength");
    expect(schema.properties.name).toMatchObject({ "x-paperclip-max-length": 256 });
    expect(schema.properties.endpoint).not.toHaveProperty("maxLength");
    expect(schema.properties.endpoint).toMatchObject({ "x-paperclip-max-length": 2048 });
    expect(schema.properties.hosts).toMatchObject({ maxItems: 256 });
    expect(schema.properties.hosts!.items).not.toHaveProperty("maxLength");
  });

  it("secretRef refuses the empty string", () => {
    expect(check(fields.secretRef(), "")).toEqual({ ok: false, errors: ["v: must not be empty"] });
  });
});

describe("fields.templateRef", () => {
  const owner = { "paperclip-provider": "p", "paperclip-company": "company-1", "paperclip-environment": "env-1" };
  const digestName = ownedTemplateName(owner);
  const legacyName = "paperclip-tpl-9-company-1-5-env-1-0123456789ab";
  const rule = "must be a template Paperclip captured (pc-, 16 hex digits, a dash and 8 more)";
  const validate = (field: z.ZodType, value: string) => defineProviderConfig(z.object({ templateRef: field.optional() })).validate({ templateRef: value });
  const accepted = (field: z.ZodType, value: string) => validate(field, value).ok;
  const patternOf = (field: z.ZodType) => {
    const schema = defineProviderConfig(z.object({ templateRef: field.optional() })).jsonSchema as { properties: Record<string, { pattern?: string }> };
    return new RegExp(schema.properties.templateRef!.pattern!);
  };

  it("accepts the kit's owner-digest names and refuses anything else, naming the field by its title and the rule", () => {
    const field = fields.templateRef({ title: "Custom image template", group: "G" });
    expect(accepted(field, digestName)).toBe(true);
    for (const value of ["golden-vm", `${digestName}0`, digestName.toUpperCase(), "pc-0123456789abcdef-0123456", legacyName]) {
      expect(validate(field, value).errors, value).toEqual([`Custom image template: ${rule}`]);
    }
  });

  it("with legacy, also accepts the previous release's paperclip-tpl- names, but only well-formed ones", () => {
    const field = fields.templateRef({ legacy: true, title: "T", group: "G" });
    expect(accepted(field, digestName)).toBe(true);
    expect(accepted(field, legacyName)).toBe(true);
    expect(validate(field, legacyName.replace("tpl-9-", "tpl-8-")).errors).toEqual([`T: ${rule}`]);
    expect(validate(field, "paperclip-tpl-").errors).toEqual([`T: ${rule}`]);
  });

  it("applies the vendor's rule only to template names, so each refusal names the one rule it broke", () => {
    const field = fields.templateRef({ title: "T", group: "G", vendorRule: (value) => (/-\d+$/.test(value) ? "must not end in a dash and digits (the vendor's rule)" : undefined) });
    expect(accepted(field, "pc-0123456789abcdef-abcdef01")).toBe(true);
    expect(validate(field, "pc-0123456789abcdef-01234567").errors).toEqual(["T: must not end in a dash and digits (the vendor's rule)"]);
    expect(validate(field, "golden-vm-7").errors).toEqual([`T: ${rule}`]);
  });

  it("shows the host's form a pattern that admits every name the server accepts and refuses other text", () => {
    const digestOnly = patternOf(fields.templateRef({ title: "T", group: "G" }));
    expect(digestOnly.source).toBe("^pc-[0-9a-f]{16}-[0-9a-f]{8}$");
    expect(digestOnly.test(digestName)).toBe(true);
    expect(digestOnly.test(legacyName)).toBe(false);
    const withLegacy = patternOf(fields.templateRef({ legacy: true, title: "T", group: "G" }));
    expect([digestName, legacyName].map((name) => withLegacy.test(name))).toEqual([true, true]);
    expect(["golden-vm", `x${digestName}`, "paperclip-tpl-"].map((name) => withLegacy.test(name))).toEqual([false, false, false]);
  });
});

describe("the host's form: titles, groups, blanks", () => {
  const titled = defineProviderConfig(
    z.object({
      memoryMb: fields.positiveInt({ min: 16, title: "Memory limit", unit: "MiB", group: "Resources", examples: [512, 1024] }).optional(),
      image: fields.ui(z.string().min(1), { title: "Image", group: "Sandbox" }).default("base:latest"),
      rootfs: fields.absolutePosixPath({ title: "Root filesystem", group: "Paths", advanced: true, examples: ["/srv/rootfs"] }).optional(),
      name: fields.ui(z.string(), { title: "Name", group: "Sandbox" }),
      hosts: fields.stringList({
        item: (value) => (/^[a-z.]+$/.test(value) ? undefined : "must be a host name"),
        itemExamples: ["api.example.com"],
        title: "Allowed hosts",
        group: "Network",
      }),
      limits: z.object({ note: fields.ui(z.string(), { title: "Note", group: "Sandbox" }).optional() }).optional(),
      timeoutMs: fields.timeoutMs({ default: 1000, title: "Command timeout", group: "Tuning", advanced: true }),
    }),
  );
  const properties = (titled.jsonSchema as { properties: Record<string, Record<string, unknown>> }).properties;

  it("emits title (with the unit), description, group, advanced and examples as JSON Schema keywords", () => {
    expect(properties.memoryMb).toMatchObject({ title: "Memory limit (MiB)", "x-paperclip-group": "Resources", examples: [512, 1024] });
    expect(properties.memoryMb).not.toHaveProperty("x-paperclip-advanced");
    expect(properties.timeoutMs).toMatchObject({ title: "Command timeout (ms)", "x-paperclip-advanced": true, default: 1000 });
    expect(properties.rootfs).toMatchObject({ type: "string", title: "Root filesystem", "x-paperclip-advanced": true, examples: ["/srv/rootfs"] });
    expect(properties.hosts).toMatchObject({ type: "array", default: [], title: "Allowed hosts", items: { type: "string", examples: ["api.example.com"] } });
    expect(configSchemaUiProblems(titled.jsonSchema).filter((p) => !p.startsWith("limits"))).toEqual([]);
  });

  it("list items carry no rule the host's form would enforce silently; the server checks them", () => {
    expect(Object.keys(properties.hosts!.items as object).sort()).toEqual(["examples", "type"]);
    expect(titled.validate({ name: "n", hosts: ["ok.example", "not a host!"] }).errors).toEqual(["Allowed hosts, item 2: must be a host name"]);
    expect(titled.validate({ name: "n", hosts: [" ok.example "] }).normalizedConfig?.hosts).toEqual(["ok.example"]);
  });

  it('"" (or blanks) in an optional field means unset, and its default applies', () => {
    const result = titled.validate({ name: "n", memoryMb: undefined, rootfs: "", image: "", limits: { note: " " } });
    expect(result).toMatchObject({ ok: true, errors: [] });
    expect(result.normalizedConfig).toEqual({ name: "n", image: "base:latest", hosts: [], limits: {}, timeoutMs: 1000 });
    expect(titled.parse({ name: "n", rootfs: "" })).not.toHaveProperty("rootfs");
  });

  it('"" in a required field is still checked by its own rule', () => {
    const required = defineProviderConfig(z.object({ token: fields.secretRef({ title: "Token", group: "Auth" }) }));
    expect(required.validate({ token: "" }).errors).toEqual(["Token: must not be empty"]);
    expect(titled.validate({ name: "" }).ok).toBe(true); // a required plain string accepts ""
  });

  it("drops empty list items and still names the item the operator sees", () => {
    const result = titled.validate({ name: "n", hosts: ["", null, "ok.example", " "] });
    expect(result.normalizedConfig?.hosts).toEqual(["ok.example"]);
    expect(titled.validate({ name: "n", hosts: [null, "", "BAD!"] }).errors).toEqual(["Allowed hosts, item 3: must be a host name"]);
  });

  it("names every field by its title in errors, all in one message", () => {
    expect(titled.validate({ memoryMb: 8, rootfs: "relative", hosts: ["x y"] }).errors).toEqual([
      "4 problems: Memory limit (MiB): must be at least 16; Root filesystem: must be an absolute POSIX path (starting with /); Name: is required; Allowed hosts, item 1: must be a host name",
    ]);
    // parse (runtime hooks) keeps them apart in ConfigError.errors
    expect(() => titled.parse({ memoryMb: 8 })).toThrow(/Memory limit \(MiB\): must be at least 16/);
  });
});

describe("configSchemaUiProblems", () => {
  it("reports missing titles and groups, Markdown in descriptions and silent item rules", () => {
    const schema = defineProviderConfig(
      z.object({
        bare: z.number().optional(),
        ticks: fields.ui(z.string(), { title: "Ticks", group: "G", description: "needs `bwrap`" }).optional(),
        patterned: fields.ui(z.array(z.string().regex(/^a/)), { title: "Patterned", group: "G" }).default([]),
        short: fields.ui(z.array(z.string().min(1)), { title: "Short", group: "G" }).default([]),
        again: fields.ui(z.string(), { title: "Ticks", group: "G" }).optional(),
      }),
    ).jsonSchema;
    expect(configSchemaUiProblems(schema)).toEqual([
      "bare: no title",
      "bare: no x-paperclip-group",
      'ticks: description has Markdown, which the host shows literally: "needs `bwrap`"',
      'patterned: list items have "pattern" (the host\'s form would disable saving without showing why)',
      'short: list items have "minLength" (the host\'s form would disable saving without showing why)',
      'again: same title as ticks ("Ticks")',
    ]);
  });
});

describe("fields.secretRef with an environment fallback", () => {
  const withFallback = defineProviderConfig(z.object({ apiKey: fields.secretRef({ envFallback: "EXAMPLE_API_KEY", title: "API key", group: "Account", description: "The account's key." }) }));

  it("is an optional secret-ref field whose description names the variable", () => {
    const field = (withFallback.jsonSchema as { properties: Record<string, Record<string, unknown>>; required?: string[] }).properties.apiKey!;
    expect(field).toMatchObject({ format: "secret-ref", title: "API key" });
    expect(field.description).toMatch(/^The account's key\. Leave empty to use the EXAMPLE_API_KEY environment variable of the plugin worker/);
    expect(withFallback.jsonSchema.required ?? []).toEqual([]);
    expect(withFallback.validate({}).ok).toBe(true);
    expect(withFallback.validate({ apiKey: "" }).normalizedConfig).toEqual({});
  });

  it("resolveSecretRef prefers the config value, then the worker's variable, else undefined", () => {
    const env = { EXAMPLE_API_KEY: "from-env" };
    expect(resolveSecretRef("from-config", "EXAMPLE_API_KEY", env)).toBe("from-config");
    expect(resolveSecretRef(undefined, "EXAMPLE_API_KEY", env)).toBe("from-env");
    expect(resolveSecretRef("  ", "EXAMPLE_API_KEY", env)).toBe("from-env");
    expect(resolveSecretRef(undefined, "EXAMPLE_API_KEY", { EXAMPLE_API_KEY: " " })).toBeUndefined();
    expect(resolveSecretRef(undefined, "EXAMPLE_API_KEY", {})).toBeUndefined();
  });
});

describe("lease reuse fields", () => {
  const reuse = defineProviderConfig(z.object({ reuseLease: fields.reuseLease(), runnerLifecycleMode: fields.runnerLifecycleMode() }));
  const properties = (reuse.jsonSchema as { properties: Record<string, Record<string, unknown>> }).properties;

  it("reuseLease says what the host also needs; runnerLifecycleMode is the host's setting, under Advanced", () => {
    expect(properties.reuseLease).toMatchObject({ type: "boolean", default: false, title: "Reuse lease", "x-paperclip-group": "Lease reuse" });
    expect(properties.reuseLease!.description).toMatch(/Runner lifecycle .*"warm".*project with a workspace/);
    expect(properties.runnerLifecycleMode).toMatchObject({ enum: ["inherit", "per_turn", "warm"], "x-paperclip-advanced": true });
  });

  it("passes runnerLifecycleMode through and names a bad one by its title", () => {
    expect(reuse.validate({ runnerLifecycleMode: "warm" }).normalizedConfig).toEqual({ reuseLease: false, runnerLifecycleMode: "warm" });
    expect(reuse.validate({ runnerLifecycleMode: "" }).normalizedConfig).toEqual({ reuseLease: false });
    expect(reuse.validate({ runnerLifecycleMode: "hot" }).errors).toEqual(['Runner lifecycle (Paperclip setting): must be one of "inherit", "per_turn", "warm"']);
  });
});
