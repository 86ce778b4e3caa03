// The provider's lease lifecycle against the emulator, in-process: what is created at Daytona,
// expiry, calls per operation, reuse (resume, mismatches, archived, ephemeral), restart on execute,
// ownership, and the lister.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cliSkipReason } from "@paperclip-sandbox/conformance";
import { startHarness, waitFor, type Harness } from "./__fixtures__/harness.js";
import { listLeases } from "./plugin.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ minuteMs: 60_000 });
});
afterAll(() => h?.close(), 60_000);

describe("acquire", () => {
  it("creates one sandbox with the kit's labels, the quota-safe intervals and a workspace, in 2 calls", async () => {
    const mark = h.emu.requests.mark();
    const lease = await h.acquire();
    expect(await h.calls(mark)).toEqual(["POST /api/sandbox 200", "POST /toolbox/:sandboxId/process/execute 200"]);
    expect(lease.metadata?.remoteCwd).toBe("/home/sandbox/paperclip-workspace");
    const sandbox = await h.sdk.get(lease.providerLeaseId!);
    expect(sandbox.labels).toMatchObject({ "paperclip-provider": "daytona", "paperclip-company": "company-1", "paperclip-environment": "env-1" });
    expect(sandbox.labels["paperclip-run"]).toMatch(/^run-/);
    expect([sandbox.autoStopInterval, sandbox.autoArchiveInterval, sandbox.autoDeleteInterval]).toEqual([15, 60, 10_080]);
    expect(sandbox.autoDestroyAt).toBeUndefined();
    expect(lease.expiresAt).toBeNull();
    await h.destroy(lease);
  });

  it("forwards explicit intervals unchanged, 0 and -1 included, and creates image-backed sandboxes with their resources", async () => {
    const lease = await h.acquire({ autoStopInterval: 0, autoArchiveInterval: 0, autoDeleteInterval: -1, image: "python:3.12-slim", cpu: 2, memory: 4, disk: 10 });
    const sandbox = await h.sdk.get(lease.providerLeaseId!);
    expect([sandbox.autoStopInterval, sandbox.autoArchiveInterval, sandbox.autoDeleteInterval]).toEqual([0, 0, -1]);
    expect([sandbox.cpu, sandbox.memory, sandbox.disk]).toEqual([2, 4, 10]);
    expect(sandbox.buildInfo?.dockerfileContent).toContain("FROM python:3.12-slim");
    await h.destroy(lease);
  });

  it("refuses resources without an image with the exact message, without creating anything", async () => {
    const mark = h.emu.requests.mark();
    await expect(h.acquire({ cpu: 2 })).rejects.toThrow(
      /^Invalid provider config: Daytona resource settings require image-backed sandbox creation; snapshot\/default sandbox creation cannot override CPU, memory, disk, or GPU$/,
    );
    // The kit validates before create: no vendor call at all.
    expect(await h.calls(mark)).toEqual([]);
  });

  it("maps requestedExpiresAt to a TTL that deletes the sandbox at or before it; under a minute it returns no expiry", async () => {
    const requested = new Date(Date.now() + 30 * 60_000);
    const lease = await h.acquire({}, { requestedExpiresAt: requested.toISOString() });
    const sandbox = await h.sdk.get(lease.providerLeaseId!);
    expect(sandbox.autoDestroyAt).toBe(lease.expiresAt);
    expect(Date.parse(lease.expiresAt!)).toBeLessThanOrEqual(requested.getTime());
    expect(Date.parse(lease.expiresAt!)).toBeGreaterThan(requested.getTime() - 2 * 60_000);
    await h.destroy(lease);
    const soon = await h.acquire({}, { requestedExpiresAt: new Date(Date.now() + 30_000).toISOString() });
    expect(soon.expiresAt).toBeNull(); // the host then fails closed
    await h.destroy(soon);
  });
});

describe("execute and sync", () => {
  it("costs 1 call per plain execute, 2 with stdin over 48 KiB (uploaded), 2 per live-output execute after its session", async () => {
    const lease = await h.acquire();
    let mark = h.emu.requests.mark();
    const plain = await h.sh(lease, "echo out; echo err >&2; exit 5");
    expect(plain).toMatchObject({ exitCode: 5, stdout: "out\n", stderr: "err\n", timedOut: false });
    expect(await h.calls(mark)).toEqual(["POST /toolbox/:sandboxId/process/execute 200"]);
    mark = h.emu.requests.mark();
    const big = "x".repeat(100 * 1024);
    expect((await h.sh(lease, "wc -c", { stdin: big })).stdout.trim()).toBe(String(big.length));
    expect(await h.calls(mark)).toEqual(["POST /toolbox/:sandboxId/files/bulk-upload 200", "POST /toolbox/:sandboxId/process/execute 200"]);

    const live = { liveOutput: true };
    mark = h.emu.requests.mark();
    expect(await h.sh(lease, "echo a; echo b >&2; exit 2", { config: live })).toMatchObject({ exitCode: 2, stdout: "a\n", stderr: "b\n" });
    const first = await h.calls(mark);
    expect(first).toEqual([
      "POST /toolbox/:sandboxId/process/session 201",
      "POST /toolbox/:sandboxId/process/session/:sessionId/exec 200",
      "GET /toolbox/:sandboxId/process/session/:sessionId/command/:commandId/logs 101",
    ]);
    mark = h.emu.requests.mark();
    expect(await h.sh(lease, "printf 'no newline'", { config: live })).toMatchObject({ exitCode: 0, stdout: "no newline", stderr: "" });
    expect(await h.calls(mark)).toHaveLength(2);
    await h.destroy(lease);
  });

  it("syncs in and out in 2 calls per operation through the file API", async () => {
    const { mkdtemp, writeFile, readFile, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const local = await mkdtemp(join(tmpdir(), "daytona-sync-"));
    try {
      await writeFile(join(local, "a.txt"), "alpha");
      const lease = await h.acquire();
      const cwd = lease.metadata?.remoteCwd as string;
      let mark = h.emu.requests.mark();
      await h.hooks.onEnvironmentSyncIn({
        driverKey: "daytona",
        companyId: "company-1",
        environmentId: "env-1",
        config: h.config,
        lease,
        operations: [{ operationId: "in", files: [{ sourcePath: local, targetPath: `${cwd}/tree`, kind: "directory" }] }],
      });
      expect(await h.calls(mark)).toEqual(["POST /toolbox/:sandboxId/files/bulk-upload 200", "POST /toolbox/:sandboxId/process/execute 200"]);
      mark = h.emu.requests.mark();
      await h.hooks.onEnvironmentSyncOut({
        driverKey: "daytona",
        companyId: "company-1",
        environmentId: "env-1",
        config: h.config,
        lease,
        operations: [{ operationId: "out", files: [{ sourcePath: `${cwd}/tree`, targetPath: join(local, "back"), kind: "directory" }] }],
      });
      expect(await h.calls(mark)).toEqual(["POST /toolbox/:sandboxId/process/execute 200", "POST /toolbox/:sandboxId/files/bulk-download 200"]);
      expect(await readFile(join(local, "back", "a.txt"), "utf8")).toBe("alpha");
      await h.destroy(lease);
    } finally {
      await rm(local, { recursive: true, force: true });
    }
  });

  it("starts a sandbox found stopped on execute and runs the command once more (once in all)", async () => {
    const lease = await h.acquire();
    await (await h.sdk.get(lease.providerLeaseId!)).stop(); // e.g. Daytona's auto-stop
    const mark = h.emu.requests.mark();
    const result = await h.sh(lease, "echo ran >> runs.txt; wc -l < runs.txt");
    expect(result).toMatchObject({ exitCode: 0, stdout: "1\n" });
    expect(await h.calls(mark)).toEqual([
      "POST /toolbox/:sandboxId/process/execute 502",
      "GET /api/sandbox/:sandboxIdOrName 200",
      "POST /api/sandbox/:sandboxIdOrName/start 200",
      "POST /toolbox/:sandboxId/process/execute 200",
    ]);
    await h.destroy(lease);
  });
});

describe("lease reuse", () => {
  const reuse = { reuseLease: true };

  it("release stops a reusable sandbox (receipt after Daytona says stopped) and resume starts it with its files", async () => {
    const lease = await h.acquire(reuse);
    expect((await h.sh(lease, "printf kept > kept.txt", { config: reuse })).exitCode).toBe(0);
    expect(await h.release(lease, reuse)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("stopped");
    const resumed = await h.resume(lease, reuse);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("started");
    expect((await h.sh(resumed, "cat kept.txt", { config: reuse })).stdout).toBe("kept");
    expect(await h.destroy(resumed, reuse)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("gone");
  });

  it("a fingerprint that no longer matches the sentinel expires the lease and destroys its sandbox", async () => {
    const lease = await h.acquire(reuse);
    await h.release(lease, reuse);
    const other = { ...lease, metadata: { ...lease.metadata, fingerprint: "0".repeat(64) } }; // another agent's or workspace's lease
    expect(await h.resume(other, reuse)).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("gone");
  });

  it("a changed shape (snapshot, image, target, resources) expires the lease and destroys its sandbox", async () => {
    const lease = await h.acquire(reuse);
    await h.release(lease, reuse);
    expect(await h.resume(lease, { ...reuse, snapshot: "another-snapshot" })).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("gone");
  });

  it("another company's resume is refused and leaves the sandbox alone", async () => {
    const lease = await h.acquire(reuse);
    await h.release(lease, reuse);
    expect(await h.resume(lease, reuse, { companyId: "company-2" })).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("stopped");
    await expect(h.destroy(lease, reuse, { companyId: "company-2" })).rejects.toThrow(/refusing to touch daytona sandbox .*paperclip-company is "company-1", expected "company-2"/);
    expect(await h.stateOf(lease.providerLeaseId!)).toBe("stopped");
    await h.destroy(lease, reuse);
  });

  it("runs without both agentId and executionWorkspaceId stay ephemeral: release deletes", async () => {
    for (const missing of [{ agentId: undefined }, { executionWorkspaceId: null }]) {
      const lease = await h.acquire(reuse, missing);
      expect(lease.metadata?.reusable).toBe(false);
      expect(await h.release(lease, reuse)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
      expect(await h.stateOf(lease.providerLeaseId!)).toBe("gone");
    }
  });
});

describe("archived resume (1 Daytona minute = 100 ms)", () => {
  it("restores a sandbox Daytona archived while it was released", async () => {
    const fast = await startHarness({ minuteMs: 100 });
    try {
      const reuse = { reuseLease: true, autoArchiveInterval: 1 };
      const lease = await fast.acquire(reuse);
      await fast.sh(lease, "printf survived > kept.txt", { config: reuse });
      await fast.release(lease, reuse);
      await waitFor("the auto-archive", async () => (await fast.stateOf(lease.providerLeaseId!)) === "archived");
      const resumed = await fast.resume(lease, reuse);
      expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
      expect((await fast.sh(resumed, "cat kept.txt", { config: reuse })).stdout).toBe("survived");
      await fast.destroy(resumed, reuse);
      expect(await fast.emu.leftovers()).toEqual([]);
    } finally {
      await fast.close();
    }
  });
});

describe("leases gc lister", () => {
  it("lists this provider's sandboxes by label with their labels, state and expiry", async () => {
    const lease = await h.acquire({}, { requestedExpiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    const listed = await listLeases(h.config, { env: {}, matchLabels: { "paperclip-provider": "daytona" } });
    const mine = listed.find((entry) => entry.providerLeaseId === lease.providerLeaseId);
    expect(mine).toMatchObject({ state: "started", expiresAt: lease.expiresAt, labels: { "paperclip-provider": "daytona", "paperclip-environment": "env-1" } });
    await h.destroy(lease);
    expect((await listLeases(h.config, { env: {} })).map((entry) => entry.providerLeaseId)).not.toContain(lease.providerLeaseId);
  });

  const cliMain = new URL("../../../packages/cli/dist/main.js", import.meta.url).pathname;
  const cliSkip = cliSkipReason(cliMain);
  if (cliSkip) console.log(`daytona leases gc through the CLI skipped: ${cliSkip}`);
  it.skipIf(cliSkip)("paperclip-sandbox leases gc deletes an orphan found by label through the plugin, and leaves other sandboxes alone", async () => {
    const { execFile } = await import("node:child_process");
    const { promisify } = await import("node:util");
    const { mkdtemp, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const orphan = await h.sdk.create({ labels: { "paperclip-provider": "daytona", "paperclip-company": "c-gone", "paperclip-environment": "e-gone", "paperclip-run": "r-1" } });
    const foreign = await h.sdk.create({ labels: { team: "not-paperclip" } });
    const dir = await mkdtemp(join(tmpdir(), "daytona-gc-"));
    try {
      const cli = cliMain;
      const plugin = new URL("..", import.meta.url).pathname;
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [cli, "leases", "gc", "--provider", plugin, "--db", join(dir, "leases.db"), "--min-age", "0s", "--yes", "--set", `apiUrl=${h.emu.url}`, "--secret", "apiKey=GC_DAYTONA_KEY"],
        { env: { ...process.env, GC_DAYTONA_KEY: h.emu.credentials.apiKey! } },
      );
      expect(stdout).toMatch(new RegExp(`destroyed +daytona +${orphan.id}`));
      expect(await h.stateOf(orphan.id)).toBe("gone");
      expect(await h.stateOf(foreign.id)).toBe("started");
    } finally {
      await foreign.delete(60, true);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
