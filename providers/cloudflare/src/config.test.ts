// Every validation rule of the cloudflare config, with the message the operator sees (field title first).
import { describe, expect, it } from "vitest";
import { cloudflareConfig, NAMED_NEEDS_SESSION_ID, REUSE_NEEDS_KEEP_ALIVE } from "./config.js";
import { createCloudflarePlugin } from "./plugin.js";

const good = { bridgeBaseUrl: "https://bridge.example.workers.dev", bridgeAuthToken: "t0ken" };
const plugin = createCloudflarePlugin();
const validate = (config: Record<string, unknown>) =>
  (plugin.definition as { onEnvironmentValidateConfig: (p: unknown) => Promise<{ ok: boolean; errors?: string[] }> }).onEnvironmentValidateConfig({ driverKey: "cloudflare", config });

describe("cloudflare config validation", () => {
  it("accepts the minimal config and fills the defaults", () => {
    expect(cloudflareConfig.parse(good)).toMatchObject({
      requestedCwd: "/workspace/paperclip",
      bridgeRequestTimeoutMs: 300_000,
      timeoutMs: 300_000,
      keepAlive: false,
      normalizeId: true,
      sessionStrategy: "named",
      sleepAfter: "1h",
    });
  });

  it.each([
    ["a missing bridge URL", { bridgeAuthToken: "t" }, /^Bridge URL: /],
    ["a bridge URL that is not a URL", { ...good, bridgeBaseUrl: "bridge" }, /^Bridge URL: must be an absolute URL$/],
    ["plain http to a remote bridge", { ...good, bridgeBaseUrl: "http://bridge.example.com" }, /^Bridge URL: must use https \(http is allowed only for localhost/],
    ["a missing token", { bridgeBaseUrl: good.bridgeBaseUrl }, /^Bridge token: /],
    ["a command timeout of 0", { ...good, timeoutMs: 0 }, /^Command timeout \(ms\): must be at least 1$/],
    ["a command timeout over a day", { ...good, timeoutMs: 86_400_001 }, /^Command timeout \(ms\): must be at most 86400000$/],
    ["a bridge request timeout of 0", { ...good, bridgeRequestTimeoutMs: 0 }, /^Bridge request timeout \(ms\): must be at least 1$/],
    ["a bridge request timeout over a day", { ...good, bridgeRequestTimeoutMs: 86_400_001 }, /^Bridge request timeout \(ms\): must be at most 86400000$/],
    ["a relative workspace", { ...good, requestedCwd: "workspace/paperclip" }, /^Workspace directory: must be an absolute POSIX path/],
    ["an unknown session strategy", { ...good, sessionStrategy: "shared" }, /^Session strategy: /],
    ["a session id with a space", { ...good, sessionId: "my session" }, /^Session ID: must be 1-64 letters/],
    ["a sleep-after that is no duration", { ...good, sleepAfter: "soon" }, /^Sleep after: must be a duration/],
    ["keep-alive that is not a boolean", { ...good, keepAlive: "yes" }, /^Keep alive: /],
  ])("refuses %s, naming the field", async (_name, config, message) => {
    const result = await validate(config);
    expect(result.ok).toBe(false);
    expect(result.errors?.[0]).toMatch(message);
  });

  it("refuses reuse without keep-alive (the sandbox would sleep and lose its files)", async () => {
    const result = await validate({ ...good, reuseLease: true });
    expect(result).toMatchObject({ ok: false, errors: [REUSE_NEEDS_KEEP_ALIVE] });
    expect((await validate({ ...good, reuseLease: true, keepAlive: true })).ok).toBe(true);
  });

  it.each([
    ["cleared in the form", ""],
    ["only spaces", "   "],
  ])("refuses a Session ID given blank (%s) under the named strategy, named or by default", async (_name, sessionId) => {
    expect(await validate({ ...good, sessionStrategy: "named", sessionId })).toMatchObject({ ok: false, errors: [NAMED_NEEDS_SESSION_ID] });
    expect(await validate({ ...good, sessionId })).toMatchObject({ ok: false, errors: [NAMED_NEEDS_SESSION_ID] });
    expect(NAMED_NEEDS_SESSION_ID).toMatch(/^Session ID: required when Session strategy is named/);
  });

  it("takes the default session id when the field is left out, and needs none under the default strategy", async () => {
    expect(await validate({ ...good, sessionStrategy: "named" })).toMatchObject({ ok: true });
    expect(cloudflareConfig.parse({ ...good, sessionStrategy: "named" }).sessionId).toBeUndefined();
    expect(await validate({ ...good, sessionStrategy: "default", sessionId: "" })).toMatchObject({ ok: true });
    expect(await validate({ ...good, sessionStrategy: "named", sessionId: "agent-1" })).toMatchObject({ ok: true });
  });

  it("accepts plain http to a bridge on this machine", async () => {
    expect((await validate({ ...good, bridgeBaseUrl: "http://127.0.0.1:8787" })).ok).toBe(true);
    expect((await validate({ ...good, bridgeBaseUrl: "http://localhost:8787" })).ok).toBe(true);
  });

  it("never echoes the token in an error", async () => {
    const result = await validate({ ...good, bridgeAuthToken: "s3cret-value", timeoutMs: -1 });
    expect(JSON.stringify(result)).not.toContain("s3cret-value");
  });
});
