import { describe, expect, it } from "vitest";
import { REDACTED, createRedactor, createStreamRedactor } from "./redaction.js";

describe("redaction", () => {
  const secret = "s3cr3t-token-value";
  const redactor = createRedactor([secret]);

  it("redacts plain, base64 and URL-encoded forms and Basic auth", () => {
    expect(redactor.redact(`key=${secret}!`)).toBe(`key=${REDACTED}!`);
    expect(redactor.redact(Buffer.from(secret).toString("base64"))).toBe(REDACTED);
    const basic = Buffer.from(`user:${secret}`).toString("base64");
    expect(redactor.redact(`Authorization: Basic ${basic}`)).toBe(`Authorization: Basic ${REDACTED}`);
  });

  it("masks secret-looking keys and known values deep in objects", () => {
    expect(redactor.redactDeep({ a: { apiToken: "zzz", note: `has ${secret}` }, list: [secret] })).toEqual({
      a: { apiToken: REDACTED, note: `has ${REDACTED}` },
      list: [REDACTED],
    });
  });

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
});
