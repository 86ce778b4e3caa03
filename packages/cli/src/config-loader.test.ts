import { rmSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { applySetFlags, readConfigFile, resolveSecretFlags, resolveStoredSecretRefs, withSecretRefs, withSecrets, type JsonSchema } from "./config-loader.js";
import { UsageError } from "./errors.js";

const schema: JsonSchema = {
  type: "object",
  additionalProperties: false,
  properties: {
    image: { type: "string" },
    cpu: { type: "number" },
    pids: { type: "integer" },
    reuseLease: { type: "boolean" },
    egressAllowFqdns: { type: "array", items: { type: "string" } },
    mode: { type: "string", enum: ["a", "b"] },
    apiKey: { type: "string", format: "secret-ref" },
    nested: { type: "object", properties: { depth: { type: "integer" } } },
  },
};

describe("--set typing from the configSchema", () => {
  it("types values by the schema", () => {
    const config = applySetFlags({}, ["image=ubuntu:24.04", "cpu=0.5", "pids=64", "reuseLease=true", "egressAllowFqdns=a.example,b.example", "nested.depth=3"], schema);
    expect(config).toEqual({
      image: "ubuntu:24.04",
      cpu: 0.5,
      pids: 64,
      reuseLease: true,
      egressAllowFqdns: ["a.example", "b.example"],
      nested: { depth: 3 },
    });
  });

  it("accepts JSON arrays and keeps values containing '='", () => {
    expect(applySetFlags({}, ['egressAllowFqdns=["x.example"]', "image=a=b"], schema)).toEqual({ egressAllowFqdns: ["x.example"], image: "a=b" });
  });

  it("rejects wrong types, unknown fields and bad enums with a message naming the field", () => {
    expect(() => applySetFlags({}, ["pids=many"], schema)).toThrow(/--set pids: expected an integer/);
    expect(() => applySetFlags({}, ["reuseLease=maybe"], schema)).toThrow(/expected a boolean/);
    expect(() => applySetFlags({}, ["nope=1"], schema)).toThrow(/unknown config field/);
    expect(() => applySetFlags({}, ["mode=c"], schema)).toThrow(/one of "a", "b"/);
    expect(() => applySetFlags({}, ["image"], schema)).toThrow(UsageError);
  });
});

describe("config files", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pcs-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  it("reads JSON and YAML", () => {
    writeFileSync(path.join(dir, "c.json"), '{"cpu": 2}');
    writeFileSync(path.join(dir, "c.yaml"), "cpu: 2\negressAllowFqdns:\n  - a.example\n");
    expect(readConfigFile(path.join(dir, "c.json"))).toEqual({ cpu: 2 });
    expect(readConfigFile(path.join(dir, "c.yaml"))).toEqual({ cpu: 2, egressAllowFqdns: ["a.example"] });
  });
  it("rejects a missing file, bad syntax and non-mappings in one line", () => {
    writeFileSync(path.join(dir, "bad.json"), "{nope");
    writeFileSync(path.join(dir, "list.yaml"), "- 1\n- 2\n");
    expect(() => readConfigFile(path.join(dir, "missing.json"))).toThrow(/cannot read config file .*ENOENT/);
    expect(() => readConfigFile(path.join(dir, "bad.json"))).toThrow(/not valid JSON/);
    expect(() => readConfigFile(path.join(dir, "list.yaml"))).toThrow(/must hold a mapping/);
  });
});

describe("secrets", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "pcs-secret-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "key");
  writeFileSync(file, "file-secret-value\n");

  it("reads env vars and files, and stores references instead of values", () => {
    const secrets = resolveSecretFlags(["apiKey=MY_KEY"], [], schema, { MY_KEY: "env-secret-value" });
    const config = withSecrets({ image: "x" }, secrets);
    expect(config.apiKey).toBe("env-secret-value");
    const stored = withSecretRefs({ image: "x" }, secrets);
    expect(JSON.stringify(stored)).not.toContain("env-secret-value");
    expect(stored.apiKey).toEqual({ $secret: { env: "MY_KEY" } });
    expect(resolveStoredSecretRefs(stored, { MY_KEY: "env-secret-value" }).config.apiKey).toBe("env-secret-value");

    const fromFile = resolveSecretFlags([], [`apiKey=${file}`], schema, {});
    expect(withSecrets({}, fromFile).apiKey).toBe("file-secret-value");
  });

  it("names the missing variable or file without echoing anything secret", () => {
    expect(() => resolveSecretFlags(["apiKey=UNSET_VAR"], [], schema, {})).toThrow("secret 'apiKey': environment variable UNSET_VAR is not set");
    expect(() => resolveSecretFlags([], ["apiKey=/nonexistent/key"], schema, {})).toThrow(/secret 'apiKey': cannot read \/nonexistent\/key \(ENOENT\)/);
    expect(() => resolveSecretFlags(["nope=X"], [], schema, { X: "v" })).toThrow(/unknown config field/);
  });
});
