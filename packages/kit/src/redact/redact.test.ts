import { describe, expect, it } from "vitest";
import { createRedactor, redactDeep } from "./index.js";

const secret = "s3cr3t-T0ken/with+chars";
const redact = createRedactor([secret, "abc", "pw12345678"]);
const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("createRedactor", () => {
  it("removes the plain value everywhere", () => {
    expect(redact(`token=${secret} again ${secret}`)).toBe("token=[REDACTED] again [REDACTED]");
  });

  it("ignores values shorter than 4 characters", () => {
    expect(redact("abc abcd")).toBe("abc abcd");
  });

  it("prefers the longer secret when one contains another", () => {
    const r = createRedactor(["pass", "password123"]);
    expect(r("password123")).toBe("[REDACTED]");
  });

  it("removes the base64 and base64url forms", () => {
    expect(redact(`x ${b64(secret)} y`)).toBe("x [REDACTED] y");
    expect(redact(Buffer.from(secret).toString("base64url"))).toBe("[REDACTED]");
  });

  it("removes Basic-auth forms with the secret as password or user, for any user name length", () => {
    for (const user of ["u", "us", "usr", "someone@example.com"]) {
      const header = `Authorization: Basic ${b64(`${user}:pw12345678`)}`;
      expect(redact(header), user).toBe("Authorization: Basic [REDACTED]");
    }
    expect(redact(`Basic ${b64(`${secret}:`)}`)).toBe("Basic [REDACTED]");
    expect(redact(`Basic ${b64(`${secret}:x-oauth-basic`)}`)).toBe("Basic [REDACTED]");
  });

  it("removes the URL-encoded form", () => {
    expect(redact(`https://h/?t=${encodeURIComponent(secret)}`)).toBe("https://h/?t=[REDACTED]");
  });

  it("leaves unrelated text and base64 alone", () => {
    const other = b64("completely unrelated content here");
    expect(redact(`hello world ${other}`)).toBe(`hello world ${other}`);
  });

  it("handles regex metacharacters in secrets", () => {
    expect(createRedactor(["a.b*c+d?"])("xa.b*c+d?x a-b-c-d")).toBe("x[REDACTED]x a-b-c-d");
  });
});

describe("redactDeep", () => {
  it("redacts strings in nested objects and arrays without mutating the input", () => {
    const input = { a: secret, nested: { list: [`Bearer ${secret}`, 3, null] }, [secret]: true };
    const output = redactDeep(input, redact);
    expect(output).toEqual({ a: "[REDACTED]", nested: { list: ["Bearer [REDACTED]", 3, null] }, "[REDACTED]": true });
    expect(input.a).toBe(secret);
  });

  it("survives cycles and redacts error messages", () => {
    const cyclic: Record<string, unknown> = { msg: secret };
    cyclic.self = cyclic;
    const out = redactDeep({ cyclic, err: new Error(`failed with ${secret}`) }, redact) as { cyclic: Record<string, unknown>; err: Error };
    expect(out.cyclic.msg).toBe("[REDACTED]");
    expect(out.cyclic.self).toBe(out.cyclic);
    expect(out.err.message).toBe("failed with [REDACTED]");
  });
});
