// Every config rule of the modal provider, through the plugin's own validateConfig hook (the schema
// plus the token check), as the host calls it. Errors name the field by its title.
import { describe, expect, it } from "vitest";
import { createModalPlugin } from "./plugin.js";

const tokens = { tokenId: "ak-test", tokenSecret: "as-test" };

async function validate(config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) {
  const hooks = createModalPlugin({ env }).provider.plugin.definition as Required<ReturnType<typeof createModalPlugin>["provider"]["plugin"]["definition"]>;
  return hooks.onEnvironmentValidateConfig({ driverKey: "modal", config });
}

async function errorOf(config: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const result = await validate(config, env);
  expect(result.ok, JSON.stringify(config)).toBe(false);
  expect(result.errors).toHaveLength(1);
  return result.errors![0]!;
}

describe("modal config", () => {
  it("fills the defaults of a minimal config", async () => {
    const result = await validate(tokens);
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).toMatchObject({
      appName: "paperclip",
      image: "node:22",
      workdir: "/workspace/paperclip",
      sandboxTimeoutMs: 3_600_000,
      execTimeoutMs: 300_000,
      blockNetwork: false,
      cidrAllowlist: [],
      reuseLease: false,
      reuseVia: "running",
      serverUrl: "https://api.modal.com:443",
    });
    expect(result.warnings).toEqual([]);
  });

  it("needs both halves of the token, each named, unless the worker's environment has it", async () => {
    expect(await errorOf({})).toBe(
      "2 problems: Token ID: required (or set MODAL_TOKEN_ID in the plugin worker's environment); Token secret: required (or set MODAL_TOKEN_SECRET in the plugin worker's environment)",
    );
    expect(await errorOf({ tokenId: "ak-1" })).toBe("Token secret: required (or set MODAL_TOKEN_SECRET in the plugin worker's environment)");
    expect(await errorOf({ tokenSecret: "as-1", tokenId: "  " })).toBe("Token ID: required (or set MODAL_TOKEN_ID in the plugin worker's environment)");
    expect((await validate({}, { MODAL_TOKEN_ID: "ak-env", MODAL_TOKEN_SECRET: "as-env" })).ok).toBe(true);
    expect((await validate({ tokenId: "ak-1" }, { MODAL_TOKEN_SECRET: "as-env" })).ok).toBe(true);
  });

  it("refuses app and environment names Modal would not take", async () => {
    expect(await errorOf({ ...tokens, appName: "my app!" })).toBe("App name: must be 1 to 63 letters, digits, dashes (-), dots (.) or underscores (_)");
    expect(await errorOf({ ...tokens, appName: "a".repeat(64) })).toMatch(/^App name: must be 1 to 63/);
    expect(await errorOf({ ...tokens, environment: "prod/eu" })).toMatch(/^Modal environment: must be 1 to 63/);
  });

  it("refuses an image that is not a string", async () => {
    expect(await errorOf({ ...tokens, image: 22 })).toBe("Image: must be a string");
  });

  it("takes the workdir as an absolute path only", async () => {
    expect(await errorOf({ ...tokens, workdir: "workspace" })).toBe("Working directory: must be an absolute POSIX path (starting with /)");
    expect(await errorOf({ ...tokens, workdir: "/workspace/../etc" })).toBe("Working directory: must not contain '..' segments");
    expect((await validate({ ...tokens, workdir: "/srv/work/" })).normalizedConfig).toMatchObject({ workdir: "/srv/work" });
  });

  it("takes the sandbox timeout as a positive whole number of seconds, at most 24 hours", async () => {
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: 1_500 })).toBe("Sandbox timeout (ms): must be a whole number of seconds (a multiple of 1000)");
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: 0 })).toBe("Sandbox timeout (ms): must be greater than 0");
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: -1000 })).toBe("Sandbox timeout (ms): must be greater than 0");
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: 86_401_000 })).toBe("Sandbox timeout (ms): must be at most 86400000 (24 hours, Modal's limit)");
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: "1h" })).toBe("Sandbox timeout (ms): must be a number");
    expect((await validate({ ...tokens, sandboxTimeoutMs: 86_400_000 })).ok).toBe(true);
  });

  it("takes the idle timeout as a whole number of seconds", async () => {
    expect(await errorOf({ ...tokens, idleTimeoutMs: 30_500 })).toBe("Idle timeout (ms): must be a whole number of seconds (a multiple of 1000)");
    expect(await errorOf({ ...tokens, idleTimeoutMs: 0 })).toBe("Idle timeout (ms): must be greater than 0");
    expect((await validate({ ...tokens, idleTimeoutMs: 300_000 })).ok).toBe(true);
  });

  it("takes the command timeout as a positive number of ms (Modal rounds it up to seconds)", async () => {
    expect(await errorOf({ ...tokens, execTimeoutMs: 0 })).toBe("Command timeout (ms): must be at least 1");
    expect(await errorOf({ ...tokens, execTimeoutMs: 86_400_001 })).toBe("Command timeout (ms): must be at most 86400000");
    expect((await validate({ ...tokens, execTimeoutMs: 1_500 })).ok).toBe(true);
  });

  it("blocks the network or allows IP ranges, not both, and each range is a CIDR", async () => {
    expect(await errorOf({ ...tokens, blockNetwork: true, cidrAllowlist: ["10.0.0.0/8"] })).toBe("Allowed IP ranges: cannot be combined with Block network (choose one)");
    expect(await errorOf({ ...tokens, cidrAllowlist: ["10.0.0.0/8", "10.0.0.1"] })).toBe("Allowed IP ranges, item 2: must be an IP range in CIDR form, e.g. 10.0.0.0/8 or 2001:db8::/32");
    expect(await errorOf({ ...tokens, cidrAllowlist: ["10.0.0.0/33"] })).toMatch(/^Allowed IP ranges, item 1: must be an IP range in CIDR form/);
    expect(await errorOf({ ...tokens, blockNetwork: "yes" })).toBe("Block network: must be a boolean");
    expect((await validate({ ...tokens, blockNetwork: true })).ok).toBe(true);
    expect((await validate({ ...tokens, cidrAllowlist: ["10.0.0.0/8", "2001:db8::/32"] })).ok).toBe(true);
  });

  it("takes reuse as a boolean and the reuse mode as running or snapshot", async () => {
    expect(await errorOf({ ...tokens, reuseLease: "yes" })).toBe("Reuse lease: must be a boolean");
    expect(await errorOf({ ...tokens, reuseVia: "pause" })).toBe('Reuse via: must be one of "running", "snapshot"');
  });

  it("takes the server URL as https, or plain http on loopback only", async () => {
    expect(await errorOf({ ...tokens, serverUrl: "http://modal.example:80" })).toBe("API server URL: must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)");
    expect((await validate({ ...tokens, serverUrl: "http://127.0.0.1:9000" })).ok).toBe(true);
  });

  it("refuses a server URL carrying a token (?token=...) at validation, and the probe never repeats it", async () => {
    const serverUrl = "http://127.0.0.1:9/?token=tok-s3cr3t-in-url";
    expect(await errorOf({ ...tokens, serverUrl })).toBe("API server URL: must not have a query (?...) or fragment (#...): an endpoint needs none, and credentials belong in a secret field");
    expect(await errorOf({ ...tokens, serverUrl: "https://api.modal.com/#tok-s3cr3t-in-url" })).toMatch(/^API server URL: must not have a query/);
    // The Test button's probe gets the same config: it stops at the rule, naming no part of the URL.
    const hooks = createModalPlugin({ env: {} }).provider.plugin.definition as Required<ReturnType<typeof createModalPlugin>["provider"]["plugin"]["definition"]>;
    const probe = await hooks.onEnvironmentProbe({ driverKey: "modal", companyId: "c", environmentId: "e", config: { ...tokens, serverUrl } } as never).then(
      (result) => JSON.stringify(result),
      (error: Error) => `${error.message} ${String(error.stack)}`,
    );
    expect(probe).toMatch(/API server URL: must not have a query/);
    expect(probe).not.toContain("tok-s3cr3t-in-url");
  });

  it("refuses a 1 MB image, naming the bound", async () => {
    expect(await errorOf({ ...tokens, image: "n".repeat(1_000_000) })).toBe("Image: must be at most 512 characters");
  });

  it("says all problems at once, by title", async () => {
    expect(await errorOf({ ...tokens, sandboxTimeoutMs: 1_500, workdir: "x" })).toBe(
      "2 problems: Working directory: must be an absolute POSIX path (starting with /); Sandbox timeout (ms): must be a whole number of seconds (a multiple of 1000)",
    );
  });

  it("warns that a reused lease keeps running and is billed, unless it is kept by snapshot", async () => {
    const running = await validate({ ...tokens, reuseLease: true, idleTimeoutMs: 600_000 });
    expect(running.ok).toBe(true);
    expect(running.warnings).toEqual([
      'reused leases keep their Modal sandbox running between runs (Modal has no pause): it is billed until its sandbox timeout (3600 s) or its idle timeout (600 s) ends it; set Reuse via to "snapshot" to stop billing while idle',
    ]);
    expect((await validate({ ...tokens, reuseLease: true, reuseVia: "snapshot" })).warnings).toEqual([]);
    expect((await validate({ ...tokens, reuseVia: "snapshot" })).warnings).toEqual(['Reuse via "snapshot" has no effect without Reuse lease']);
    expect((await validate({ ...tokens, idleTimeoutMs: 3_600_000 })).warnings).toEqual(["Idle timeout is not shorter than Sandbox timeout, so it never ends a sandbox"]);
  });
});
