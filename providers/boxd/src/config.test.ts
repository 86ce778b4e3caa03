import { describe, expect, it } from "vitest";
import { boxdConfig } from "./config.js";
import { checkExchangeUrl, parseApiUrl } from "./endpoint.js";

const key = `bxd_${"a".repeat(40)}`;
const validate = (config: Record<string, unknown>) => boxdConfig.validate({ apiKey: key, ...config });

describe("boxd config", () => {
  it("fills the seed's defaults: reuse off, prefix paperclip, command timeout 1 hour, boxd.sh endpoints", () => {
    expect(boxdConfig.parse({ apiKey: key })).toMatchObject({
      reuseLease: false,
      namePrefix: "paperclip",
      timeoutMs: 3_600_000,
      apiUrl: "https://boxd.sh:9443",
      exchangeUrl: "https://app.boxd.sh/api/v1/auth/token",
    });
  });

  it("accepts boxd's four sizes and refuses any other vCPU count, naming the field and the rule", () => {
    for (const vcpu of [1, 2, 4, 8]) expect(validate({ vcpu }).ok).toBe(true);
    for (const vcpu of [3, 0, 16, 2.5]) expect(validate({ vcpu })).toMatchObject({ ok: false, errors: ["vCPUs: must be one of 1, 2, 4, 8 (boxd's sizes)"] });
  });

  it("refuses a size with a snapshot: a restored machine keeps the snapshot's size", () => {
    expect(validate({ vcpu: 4, snapshot: "base-image" })).toMatchObject({ ok: false, errors: [expect.stringMatching(/^vCPUs: cannot be combined with Snapshot/)] });
    expect(validate({ snapshot: "base-image" }).ok).toBe(true);
  });

  it("keeps machine names host names: the prefix is a short DNS label", () => {
    expect(validate({ namePrefix: "ci-runs" }).ok).toBe(true);
    expect(validate({ namePrefix: "Bad_Prefix" }).errors?.[0]).toMatch(/^Name prefix: must be lowercase letters, digits and dashes/);
    expect(validate({ namePrefix: "x".repeat(39) }).errors?.[0]).toMatch(/^Name prefix: must be at most 38 characters/);
    expect(validate({ org: "Not An Org" }).errors?.[0]).toMatch(/^Org: must be an org slug/);
  });

  it("takes a captured template by its owner-digest snapshot name only, naming the field and the rule otherwise", () => {
    expect(validate({ templateRef: "pc-0123456789abcdef-01234567" }).ok).toBe(true);
    for (const templateRef of ["base-image", "paperclip-tpl-9-company-1-5-env-1-0123456789ab"]) {
      expect(validate({ templateRef }).errors, templateRef).toEqual(["Custom image template: must be a template Paperclip captured (pc-, 16 hex digits, a dash and 8 more)"]);
    }
  });

  it("accepts the host's own run flags and refuses unknown fields", () => {
    expect(validate({ runnerLifecycleMode: "warm", runnerIdleTimeoutMs: 1000, reuseLease: true }).ok).toBe(true);
    expect(validate({ image: "ubuntu" }).errors?.[0]).toMatch(/image.*unknown field/);
  });

  it("refuses plaintext to a remote endpoint (the token would travel in clear text)", () => {
    expect(validate({ apiUrl: "http://boxd.example.com:9443" }).errors?.[0]).toBe("API URL: must use https (plaintext is allowed only for localhost, 127.0.0.0/8 and ::1)");
    expect(validate({ exchangeUrl: "http://boxd.example.com/token" }).errors?.[0]).toBe("Token exchange URL: must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)");
    expect(validate({ apiUrl: "http://127.0.0.1:9443", exchangeUrl: "http://localhost:1/api/v1/auth/token" }).ok).toBe(true);
  });
});

describe("boxd base-URL rules", () => {
  it("https:// dials TLS, http:// plaintext (loopback only), the scheme stripped", () => {
    expect(parseApiUrl("https://boxd.sh:9443")).toEqual({ target: "boxd.sh:9443", tls: true, host: "boxd.sh" });
    expect(parseApiUrl("http://127.0.0.1:7000")).toEqual({ target: "127.0.0.1:7000", tls: false, host: "127.0.0.1" });
    expect(() => parseApiUrl("http://boxd.sh:9443")).toThrow(/must use https/);
  });

  it("a bare host:port is TLS unless the host is loopback (localhost, 127.*)", () => {
    expect(parseApiUrl("boxd.sh:9443")).toMatchObject({ target: "boxd.sh:9443", tls: true });
    expect(parseApiUrl("localhost:9443")).toMatchObject({ target: "localhost:9443", tls: false });
    expect(parseApiUrl("127.0.0.5:9443")).toMatchObject({ tls: false });
  });

  it("refuses paths, credentials and other schemes", () => {
    expect(() => parseApiUrl("https://boxd.sh:9443/v1")).toThrow(/must not have a path/);
    expect(() => parseApiUrl("https://user:pw@boxd.sh:9443")).toThrow(/must not contain credentials/);
    expect(() => parseApiUrl("grpc://boxd.sh:9443")).toThrow(/got scheme grpc/);
    expect(() => checkExchangeUrl("ftp://app.boxd.sh/x")).toThrow(/must use https/);
  });
});
