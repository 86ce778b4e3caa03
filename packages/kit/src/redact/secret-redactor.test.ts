import { describe, expect, it } from "vitest";
import { REDACTED, createSecretRedactor, createStreamRedactor, isSecretLookingKey } from "./index.js";

describe("createSecretRedactor", () => {
  const secret = "s3cr3t-token-value";
  const redactor = createSecretRedactor([secret]);

  it("redacts plain, base64 and URL-encoded forms and Basic auth", () => {
    expect(redactor.redact(`key=${secret}!`)).toBe(`key=${REDACTED}!`);
    expect(redactor.redact(Buffer.from(secret).toString("base64"))).toBe(REDACTED);
    const basic = Buffer.from(`user:${secret}`).toString("base64");
    expect(redactor.redact(`Authorization: Basic ${basic}`)).toBe(`Authorization: Basic ${REDACTED}`);
  });

  it("masks secret-looking keys and known values deep in objects", () => {
    expect(redactor.redactDeep({ a: { apiToken: "zzz", note: `has ${secret}` }, list: [secret], apiKeys: ["k1", "k2"] })).toEqual({
      a: { apiToken: REDACTED, note: `has ${REDACTED}` },
      list: [REDACTED],
      apiKeys: [REDACTED, REDACTED],
    });
  });

  it("learns secrets after creation, and masks a whole value shorter than the matcher's minimum", () => {
    const r = createSecretRedactor();
    expect(r.redact("late-secret-1")).toBe("late-secret-1");
    r.add("late-secret-1");
    r.add("ab");
    expect(r.redact("x late-secret-1 y")).toBe(`x ${REDACTED} y`);
    expect(r.redactDeep({ short: "ab", note: "ab cd" })).toEqual({ short: REDACTED, note: "ab cd" });
    expect(r.forms).toEqual(["late-secret-1"]);
  });

  it("survives cycles and redacts error messages in deep values", () => {
    const cyclic: Record<string, unknown> = { msg: secret };
    cyclic.self = cyclic;
    const out = redactor.redactDeep({ cyclic, err: new Error(`failed: ${secret}`) }) as { cyclic: Record<string, unknown>; err: Error };
    expect(out.cyclic.msg).toBe(REDACTED);
    expect(out.cyclic.self).toBe(out.cyclic);
    expect(out.err.message).toBe(`failed: ${REDACTED}`);
  });
});

describe("isSecretLookingKey", () => {
  it("recognises credential-bearing names and leaves ordinary ones", () => {
    for (const key of ["apiToken", "X-Api-Key", "client_secret", "Authorization", "password", "Cookie", "privateKey"]) expect(isSecretLookingKey(key), key).toBe(true);
    for (const key of ["name", "image", "cpu", "stateDir", "apiUrl"]) expect(isSecretLookingKey(key), key).toBe(false);
  });
});

describe("createStreamRedactor", () => {
  const secret = "s3cr3t-token-value";
  const redactor = createSecretRedactor([secret]);

  it("redacts a secret split across stream chunks without holding back unrelated output", () => {
    const written: string[] = [];
    const stream = createStreamRedactor(redactor, (t) => written.push(t));
    stream.push("hello world\n");
    expect(written.join("")).toBe("hello world\n");
    stream.push(`token: ${secret.slice(0, 6)}`);
    stream.push(`${secret.slice(6)} done\n`);
    stream.flush();
    expect(written.join("")).toBe(`hello world\ntoken: ${REDACTED} done\n`);
    expect(written.join("")).not.toContain(secret);
  });

  it("flushes a held tail that turned out not to be a secret", () => {
    const written: string[] = [];
    const stream = createStreamRedactor(redactor, (t) => written.push(t));
    stream.push("ends with s3cr");
    expect(written.join("")).toBe("ends with ");
    stream.flush();
    expect(written.join("")).toBe("ends with s3cr");
  });
});
