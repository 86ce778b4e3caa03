import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { PluginDefinition, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { hostFor } from "@paperclip-sandbox/conformance";
import { REUSE_SENTINEL_PATH } from "@paperclip-sandbox/kit";
import manifest from "./manifest.js";
import { createFakePlugin, type FakePluginDeps } from "./plugin.js";

const baseDir = mkdtempSync(join(tmpdir(), "fake-plugin-test-"));
afterAll(() => rmSync(baseDir, { recursive: true, force: true }));

const scope = { driverKey: "fake-plugin", companyId: "company-1", environmentId: "env-1" };

const identity = { companyId: scope.companyId, environmentId: scope.environmentId, agentId: "agent-1", executionWorkspaceId: "ws-1" };

/** The plugin in process, set up as the host does; `logs` is the live output it streamed. */
async function startPlugin(deps: FakePluginDeps = {}) {
  const host = hostFor(createFakePlugin({ baseDir, ...deps }), {}, { driverKey: scope.driverKey, identity });
  return { hooks: (await host.hooks()) as Required<PluginDefinition>, logs: host.executionLog, host };
}

/** A lease as the host acquires it (agent and execution workspace: a kept lease needs both). */
async function acquire(config: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  const { hooks, logs, host } = await startPlugin();
  const run = host.withConfig(config);
  const lease = await run.acquire({ runId: "run-1", ...extra });
  const exec = (command: string, args: string[] = [], more: Record<string, unknown> = {}) => run.execute(lease, command, args, more);
  return { hooks, logs, lease, exec, remoteCwd: lease.metadata?.remoteCwd as string };
}

const leaseRef = (lease: PluginEnvironmentLease) => ({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

describe("manifest", () => {
  it("declares one sandbox_provider driver with the config schema and reuse/sync capabilities", () => {
    expect(manifest.id).toBe("paperclip-sandbox.fake-plugin");
    expect(manifest.capabilities).toEqual(["environment.drivers.register"]);
    const driver = manifest.environmentDrivers?.[0];
    expect(driver).toMatchObject({
      driverKey: "fake-plugin",
      kind: "sandbox_provider",
      supportsReusableLeases: true,
      sandboxCapabilities: {
        reusableLeases: true,
        nativeSyncIn: true,
        nativeSyncOut: true,
        concurrentSyncOperations: true,
        duplexCommandStream: true,
        incrementalSessionOutput: true,
        persistentProcessSessions: true,
        independentControlCommands: true,
      },
    });
    expect(Object.keys((driver!.configSchema as { properties: object }).properties)).toEqual(
      expect.arrayContaining(["image", "timeoutMs", "reuseLease", "acquireDelayMs", "probeFailure", "acquireFailure", "executeFailure"]),
    );
  });
});

describe("validate and probe", () => {
  it("normalizes a valid config and rejects bad ones with field-named errors", async () => {
    const { hooks } = await startPlugin();
    expect(await hooks.onEnvironmentValidateConfig({ driverKey: "fake-plugin", config: {} })).toMatchObject({
      ok: true,
      normalizedConfig: { image: "fake:latest", timeoutMs: 300_000, reuseLease: false },
    });
    const bad = await hooks.onEnvironmentValidateConfig({ driverKey: "fake-plugin", config: { timeoutMs: 0, colour: "red" } });
    expect(bad.ok).toBe(false);
    // One message, each field named by its title: the host shows errors[0] only.
    expect(bad.errors).toEqual(["2 problems: colour: unknown field (not accepted by this provider); Command timeout (ms): must be at least 1"]);
  });

  it('takes "" in an optional text field (the host form\'s cleared input) as unset', async () => {
    const { hooks } = await startPlugin();
    const result = await hooks.onEnvironmentValidateConfig({ driverKey: "fake-plugin", config: { image: "", probeFailure: "" } });
    expect(result).toMatchObject({ ok: true, warnings: [] });
    expect(result.normalizedConfig).toMatchObject({ image: "fake:latest" });
    expect(result.normalizedConfig).not.toHaveProperty("probeFailure");
  });

  it("warns when fault injection is on", async () => {
    const { hooks } = await startPlugin();
    const result = await hooks.onEnvironmentValidateConfig({ driverKey: "fake-plugin", config: { probeFailure: "down" } });
    expect(result.warnings).toEqual(["fault injection is enabled: probeFailure"]);
  });

  it("probes ok, or fails with an error diagnostic when probeFailure is set", async () => {
    const { hooks } = await startPlugin();
    const ready = await hooks.onEnvironmentProbe({ ...scope, config: {} });
    expect(ready.ok).toBe(true);
    // The host shows only the summary, so the warning is in it; the diagnostic keeps its code.
    expect(ready.summary).toBe("fake-plugin sandbox ready — NO isolation: commands run on the worker's host as its user");
    expect(ready.diagnostics).toEqual([expect.objectContaining({ severity: "warning", code: "FAKE_NO_ISOLATION" })]);
    const failed = await hooks.onEnvironmentProbe({ ...scope, config: { probeFailure: "simulated outage" } });
    expect(failed.ok).toBe(false);
    expect(failed.summary).toBe("fake-plugin sandbox not usable — probe failed (injected): simulated outage");
    expect(failed.diagnostics).toEqual([expect.objectContaining({ severity: "error", message: "simulated outage" })]);
  });
});

describe("acquire", () => {
  it("creates a private lease directory and returns its workspace as remoteCwd", async () => {
    const { lease, remoteCwd, hooks } = await acquire();
    expect(lease.providerLeaseId).toMatch(/^fake-/);
    expect(lease.expiresAt).toBeNull();
    const leaseDir = lease.metadata?.leaseDir as string;
    expect(remoteCwd).toBe(join(leaseDir, "workspace"));
    for (const dir of [leaseDir, remoteCwd, join(leaseDir, "home"), join(leaseDir, "tmp")]) {
      expect(statSync(dir).mode & 0o777, dir).toBe(0o700);
    }
    expect(await hooks.onEnvironmentRealizeWorkspace({ ...scope, config: {}, lease, workspace: {} })).toEqual({ cwd: remoteCwd });
  });

  it("bounds the lease by requestedExpiresAt and refuses a past deadline", async () => {
    const deadline = new Date(Date.now() + 60_000).toISOString();
    expect((await acquire({}, { requestedExpiresAt: deadline })).lease.expiresAt).toBe(deadline);
    await expect(acquire({}, { requestedExpiresAt: "2000-01-01T00:00:00Z" })).rejects.toThrow(/not in the future/);
  });

  it("injects acquire delay and failure", async () => {
    const started = Date.now();
    await acquire({ acquireDelayMs: 150 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    await expect(acquire({ acquireFailure: "quota exceeded" })).rejects.toThrow(/quota exceeded/);
  });
});

describe("execute", () => {
  it("runs in the workspace with a minimal environment plus the request env, streaming live output", async () => {
    const { exec, remoteCwd, logs, lease } = await acquire();
    const leaseDir = lease.metadata?.leaseDir as string;
    const result = await exec("sh", ["-c", 'printf "%s\\n" "$(pwd)" "$HOME" "$TMPDIR" "$PATH" "$GREETING" "${PAPERCLIP_UNSET:-unset}"'], {
      env: { GREETING: "hello world" },
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.split("\n").slice(0, 6)).toEqual([
      remoteCwd,
      join(leaseDir, "home"),
      join(leaseDir, "tmp"),
      "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "hello world",
      "unset",
    ]);
    expect(logs.map(([stream]) => stream)).toContain("stdout");
    expect(logs.map(([, text]) => text).join("")).toBe(result.stdout);
  });

  it("passes stdin and uses the config timeout as the default", async () => {
    const { exec } = await acquire({ timeoutMs: 200 });
    expect((await exec("cat", [], { stdin: "piped\n" })).stdout).toBe("piped\n");
    const slow = await exec("sleep", ["5"]);
    expect(slow).toMatchObject({ timedOut: true, exitCode: null });
  });

  it("injects execute failure", async () => {
    const { hooks, lease } = await acquire();
    await expect(hooks.onEnvironmentExecute({ ...scope, config: { executeFailure: "link down" }, lease, command: "true" })).rejects.toThrow(/link down/);
  });

  it("refuses a released lease", async () => {
    const { hooks, lease, exec } = await acquire();
    await hooks.onEnvironmentReleaseLease(leaseRef(lease));
    await expect(exec("true")).rejects.toThrow(/is not running \(released, destroyed or expired\)/);
  });
});

describe("release and destroy", () => {
  it("keeps background processes between executes, ends them at release, then removes the directory", async () => {
    const { hooks, lease, exec } = await acquire();
    const started = await exec("sh", ["-c", "sleep 30 >/dev/null 2>&1 & echo $!"]);
    const pid = Number(started.stdout.trim());
    await exec("true");
    expect(pidAlive(pid)).toBe(true);
    const receipt = await hooks.onEnvironmentReleaseLease(leaseRef(lease));
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(pidAlive(pid)).toBe(false);
    expect(existsSync(lease.metadata?.leaseDir as string)).toBe(false);
  });

  it("returns the receipt only after a running execute has ended", async () => {
    const { hooks, lease, exec } = await acquire();
    let executeEnded = false;
    const running = exec("sleep", ["30"]).then((r) => ((executeEnded = true), r));
    await new Promise((resolve) => setTimeout(resolve, 150));
    await hooks.onEnvironmentReleaseLease({ ...leaseRef(lease), cancelActiveWork: true });
    expect(executeEnded).toBe(true);
    expect((await running).exitCode).toBeNull();
  });

  it("destroying twice is fine", async () => {
    const { hooks, lease } = await acquire();
    const expected = { providerLeaseId: lease.providerLeaseId, state: "destroyed" };
    expect(await hooks.onEnvironmentDestroyLease(leaseRef(lease))).toEqual(expected);
    expect(await hooks.onEnvironmentDestroyLease(leaseRef(lease))).toEqual(expected);
  });
});

describe("reusable leases", () => {
  it("release stops but keeps files, and a new worker resumes the same lease", async () => {
    const { hooks, lease, exec, remoteCwd } = await acquire({ reuseLease: true });
    await exec("sh", ["-c", "echo kept > note.txt"]);
    expect(await hooks.onEnvironmentReleaseLease(leaseRef(lease))).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(existsSync(join(remoteCwd, REUSE_SENTINEL_PATH))).toBe(true);

    const restarted = await startPlugin();
    const resumed = await restarted.hooks.onEnvironmentResumeLease(leaseRef(lease) as never);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    const read = await restarted.hooks.onEnvironmentExecute({ ...scope, config: {}, lease: resumed, command: "cat", args: ["note.txt"] });
    expect(read.stdout).toBe("kept\n");
    await restarted.hooks.onEnvironmentDestroyLease(leaseRef(lease));
  });

  it("refuses to resume when the sentinel no longer matches, and destroys the stale sandbox", async () => {
    const { hooks, lease, remoteCwd } = await acquire({ reuseLease: true });
    await hooks.onEnvironmentReleaseLease(leaseRef(lease));
    writeFileSync(join(remoteCwd, REUSE_SENTINEL_PATH), JSON.stringify({ fingerprint: "someone-else" }));
    const resumed = await hooks.onEnvironmentResumeLease(leaseRef(lease) as never);
    expect(resumed).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(existsSync(lease.metadata?.leaseDir as string)).toBe(false);
  });

  it("reports missing, foreign and expired leases as expired", async () => {
    const { hooks } = await startPlugin();
    for (const providerLeaseId of ["fake-00000000-0000-0000-0000-000000000000", "../../etc", ""]) {
      expect(await hooks.onEnvironmentResumeLease({ ...scope, config: {}, providerLeaseId })).toEqual({ providerLeaseId: null, metadata: { expired: true } });
    }
    const deadline = new Date(Date.now() + 60_000);
    const { lease } = await acquire({ reuseLease: true }, { requestedExpiresAt: deadline.toISOString() });
    const later = await startPlugin({ now: () => new Date(deadline.getTime() + 1) });
    expect(await later.hooks.onEnvironmentResumeLease(leaseRef(lease) as never)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
  });
});

describe("sync", () => {
  it("copies a file in and back out, keeping its mode", async () => {
    const { hooks, lease, remoteCwd } = await acquire();
    const hostDir = mkdtempSync(join(baseDir, "host-"));
    writeFileSync(join(hostDir, "secret.txt"), "top secret\n", { mode: 0o600 });
    const file = (sourcePath: string, targetPath: string) => ({ sourcePath, targetPath, kind: "file" as const, mode: 0o600 });

    const inbound = await hooks.onEnvironmentSyncIn({
      ...scope,
      config: {},
      lease,
      operations: [{ operationId: "op-in", files: [file(join(hostDir, "secret.txt"), join(remoteCwd, "secret.txt"))] }],
    });
    expect(inbound.operations).toEqual([expect.objectContaining({ operationId: "op-in", filesTransferred: 1 })]);
    expect(readFileSync(join(remoteCwd, "secret.txt"), "utf8")).toBe("top secret\n");

    await hooks.onEnvironmentSyncOut({
      ...scope,
      config: {},
      lease,
      operations: [{ operationId: "op-out", files: [file(join(remoteCwd, "secret.txt"), join(hostDir, "back.txt"))] }],
    });
    expect(readFileSync(join(hostDir, "back.txt"), "utf8")).toBe("top secret\n");
    expect(statSync(join(hostDir, "back.txt")).mode & 0o777).toBe(0o600);
  });

  it("refuses sandbox paths outside the lease directory", async () => {
    const { hooks, lease } = await acquire();
    const hostDir = mkdtempSync(join(baseDir, "host-"));
    writeFileSync(join(hostDir, "f.txt"), "x");
    const escaped = join(baseDir, "escaped.txt");
    await expect(
      hooks.onEnvironmentSyncIn({
        ...scope,
        config: {},
        lease,
        operations: [{ operationId: "op", files: [{ sourcePath: join(hostDir, "f.txt"), targetPath: escaped, kind: "file" }] }],
      }),
    ).rejects.toThrow();
    expect(existsSync(escaped)).toBe(false);
  });
});
