// Every validation rule of the coder config, with the message the operator sees.
import { describe, expect, it } from "vitest";
import { coderConfig, configProblems, configWarnings, DIRECT_RUNNER_REFUSED } from "./config.js";
import { createCoderPlugin } from "./plugin.js";

const good = { coderUrl: "https://coder.example.com", apiToken: "abcdefghij-0123456789abcdefghijkl", template: "paperclip" };
const errorsOf = (config: Record<string, unknown>) => coderConfig.validate(config).errors ?? [];

async function validateThroughPlugin(config: Record<string, unknown>, deps: Parameters<typeof createCoderPlugin>[0] = {}) {
  const plugin = createCoderPlugin({ env: {}, ...deps });
  return plugin.definition.onEnvironmentValidateConfig!({ driverKey: "coder", config });
}

describe("coder config", () => {
  it("accepts the seed's fields with their defaults, and the host's own flags", () => {
    const result = coderConfig.validate({ ...good, runnerLifecycleMode: "warm", reuseLease: true, archiveOnRelease: true });
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).toMatchObject({
      commandTransport: "app-proxy",
      runnerAppSlug: "paperclip-runner",
      stopAfterHours: 8,
      coderBin: "coder",
      workspaceName: "paperclip",
      workspaceParameters: {},
    });
  });

  it("names each field's rule", () => {
    expect(errorsOf({ ...good, coderUrl: "http://coder.example.com" })[0]).toMatch(/^Coder URL: must use https \(http is allowed only for localhost/);
    expect(errorsOf({ ...good, coderUrl: "https://user:pw@coder.example.com" })[0]).toMatch(/^Coder URL: must not contain credentials/);
    expect(errorsOf({ ...good, template: "bad name" })[0]).toBe("Template: must be a Coder template name (letters, digits and single hyphens)");
    expect(errorsOf({ ...good, template: "x".repeat(33) })[0]).toBe("Template: must be a Coder template name (at most 32 characters)");
    expect(errorsOf({ ...good, commandTransport: "exec" })[0]).toMatch(/^Command transport: /);
    expect(errorsOf({ ...good, runnerAppSlug: "Paperclip_Runner" })[0]).toBe("Runner app slug: must be a coder_app slug (lowercase letters, digits, single hyphens)");
    expect(errorsOf({ ...good, workspaceName: "x".repeat(16) })[0]).toBe("Workspace name prefix: must be at most 15 characters (Coder names are at most 32)");
    expect(errorsOf({ ...good, workspaceName: "1abc" })[0]).toBe("Workspace name prefix: must start with a letter; lowercase letters, digits and single hyphens");
    expect(errorsOf({ ...good, stopAfterHours: 0 })[0]).toMatch(/^Stop after \(hours\): /);
    expect(errorsOf({ ...good, stopAfterHours: 721 })[0]).toMatch(/^Stop after \(hours\): .*720/);
    expect(errorsOf({ ...good, workspaceParameters: { "bad name": "x" } })[0]).toBe('Workspace parameters: "bad name" is not a parameter name (a letter or _, then letters, digits, _ and -)');
    expect(errorsOf({ ...good, workspaceParameters: { region: 3 } })[0]).toMatch(/^Workspace parameters \/ region: /);
    expect(errorsOf({ ...good, workspaceDir: "relative/dir" })[0]).toBe("Workspace directory: must be an absolute POSIX path (starting with /)");
    expect(errorsOf({ ...good, apiToken: "" }).length).toBe(0); // blank: unset, the environment may hold it
  });

  it("refuses a workspace directory that is not a direct child of /home/coder, under either name", () => {
    const problem = (dir: string) => configProblems(coderConfig.parse({ ...good, workspaceDir: dir }), "linux", {});
    expect(configProblems(coderConfig.parse({ ...good, remoteCwd: "/home/coder/a/b" }), "linux", {})[0]).toMatch(/^Workspace directory: must be a directory directly under/);
    expect(configProblems(coderConfig.parse({ ...good, workspaceDir: "/home/coder/a", remoteCwd: "/home/coder/b" }), "linux", {})).toEqual([
      "Workspace directory and its old name remoteCwd name different directories (/home/coder/a, /home/coder/b): set one",
    ]);
    expect(problem("/home/coder/workspace")).toEqual([]);
    expect(problem("/home/coder/proj/")).toEqual([]); // normalized
    for (const bad of ["/home/coder", "/home/coder/a/b", "/workspace", "/home/other/x", "/tmp"]) {
      expect(problem(bad)).toEqual([expect.stringMatching(/^Workspace directory: must be a directory directly under \/home\/coder \(like \/home\/coder\/workspace\), got /)]);
    }
  });

  it("saves the seed's remoteCwd as workspaceDir (the host strips a key named remoteCwd from configs it sends plugins)", () => {
    const result = coderConfig.validate({ ...good, remoteCwd: "/home/coder/proj" });
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).toMatchObject({ workspaceDir: "/home/coder/proj" });
    expect(result.normalizedConfig).not.toHaveProperty("remoteCwd");
    expect(result.warnings).toContainEqual(expect.stringMatching(/^remoteCwd is saved as Workspace directory/));
    expect(coderConfig.validate(good).normalizedConfig).not.toHaveProperty("workspaceDir");
  });

  it("parses directRunnerUrl of old configs and refuses it", async () => {
    const result = await validateThroughPlugin({ ...good, directRunnerUrl: "http://10.0.0.7:4100" });
    expect(result.ok).toBe(false);
    expect(result.errors).toEqual([`Direct runner URL: ${DIRECT_RUNNER_REFUSED}`]);
  });

  it("accepts workerImage as metadata only", () => {
    expect(coderConfig.validate({ ...good, workerImage: "ghcr.io/acme/worker:1" }).ok).toBe(true);
  });

  it("refuses CODER_HEADER_COMMAND on Windows, and only there", async () => {
    const env = { CODER_HEADER_COMMAND: "printf 'X-Auth=1'" };
    expect((await validateThroughPlugin(good, { platform: "win32", env })).errors).toEqual(["CODER_HEADER_COMMAND is not supported on Windows (unset it, or use CODER_HEADER)"]);
    expect((await validateThroughPlugin(good, { platform: "linux", env })).ok).toBe(true);
  });

  it("warns about a token that looks like an unresolved secret reference (a UUID)", async () => {
    const result = await validateThroughPlugin({ ...good, apiToken: "0b7c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3" });
    expect(result.ok).toBe(true);
    expect(result.warnings).toContainEqual(expect.stringMatching(/^Session token looks like an unresolved secret reference \(a UUID\)/));
    expect((await validateThroughPlugin(good)).warnings ?? []).toEqual([]);
  });

  it("warns when the URL or token is missing everywhere, and takes them from CODER_URL and CODER_SESSION_TOKEN", () => {
    const bare = coderConfig.parse({ template: "paperclip" });
    expect(configWarnings(bare, {})).toEqual([
      "no Coder URL: set Coder URL, or CODER_URL in the plugin worker's environment",
      "no session token: set Session token, or CODER_SESSION_TOKEN in the plugin worker's environment",
    ]);
    expect(configWarnings(bare, { CODER_URL: "https://coder.example.com", CODER_SESSION_TOKEN: "abcdefghij-0123456789abcdefghijkl" })).toEqual([]);
  });
});
