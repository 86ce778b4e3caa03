// Lease lifecycle beyond the shared conformance suite: worker restarts, release semantics, reuse,
// expiry and leak clean-up. Drives the built worker (`npx tsc -b providers/bubblewrap` first).
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findOrphans, listLeaseDirectories, reapLease } from "./index.js";
import { probeBubblewrap } from "./probe.js";
import { providerConfig } from "./config.js";
import { eventually, hostProcessesMatching, startHarness, type Harness } from "./test-support/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

const marker = () => String(900_000 + Math.floor(Math.random() * 99_999));

describe("bubblewrap lease lifecycle", () => {
  it("survives a worker SIGKILL: the next worker adopts the lease, a background process still runs", async () => {
    const lease = await h.acquire();
    const tag = marker();
    const started = await h.sh(lease, `nohup sleep ${tag} >/dev/null 2>&1 & echo $!`);
    expect(started.exitCode).toBe(0);
    const pid = started.stdout.trim();
    await h.sh(lease, "echo before-restart > state.txt");
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${tag}`),
        (pids) => pids.length === 1,
      ),
    ).toHaveLength(1);

    await h.restartWorker("SIGKILL");

    const after = await h.sh(lease, `kill -0 ${pid} && cat state.txt && ps -o args= -p ${pid}`);
    expect(after.stderr).toBe("");
    expect(after.exitCode).toBe(0);
    expect(after.stdout).toBe(`before-restart\nsleep ${tag}\n`);
    const receipt = await h.release(lease);
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(hostProcessesMatching(`sleep ${tag}`)).toEqual([]);
  });

  it("release ends the whole process tree (setsid, nohup, TERM-ignoring) before its receipt", async () => {
    const lease = await h.acquire();
    const tag = marker();
    const script = [
      `setsid sleep ${tag}1 >/dev/null 2>&1 </dev/null &`,
      `nohup sleep ${tag}2 >/dev/null 2>&1 &`,
      `(trap '' TERM HUP; exec sleep ${tag}3) >/dev/null 2>&1 &`,
      `setsid sh -c 'sleep ${tag}4 & wait' >/dev/null 2>&1 &`,
      "echo started",
    ].join("\n");
    expect((await h.sh(lease, script)).stdout).toBe("started\n");
    const before = await eventually(
      () => hostProcessesMatching(`sleep ${tag}`),
      (pids) => pids.length >= 4,
    );
    expect(before.length).toBeGreaterThanOrEqual(4);
    const receipt = await h.release(lease);
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    // Checked right after the receipt: no grace period.
    expect(hostProcessesMatching(`sleep ${tag}`)).toEqual([]);
    expect(fs.existsSync(path.join(h.stateDir, "leases", lease.providerLeaseId!))).toBe(false);
  });

  it("a timed-out execute ends the processes it started in sessions of their own (setsid, setsid -f, orphaned) by its result, not at release", async () => {
    const lease = await h.acquire();
    const tag = marker();
    const script = [
      `setsid sleep ${tag}1 >/dev/null 2>&1 </dev/null &`,
      `setsid -f sleep ${tag}2 >/dev/null 2>&1 </dev/null`,
      `(setsid sh -c 'trap "" TERM; sleep ${tag}3' >/dev/null 2>&1 </dev/null &)`,
      "sleep 30",
    ].join("\n");
    const running = h.sh(lease, script, { timeoutMs: 1_500 });
    expect(
      (
        await eventually(
          () => hostProcessesMatching(`sleep ${tag}`),
          (pids) => pids.length >= 3,
        )
      ).length,
    ).toBeGreaterThanOrEqual(3);
    const result = await running;
    expect(result.timedOut).toBe(true);
    // Checked right after the result: the lease is still there, its escaped processes are not.
    expect(hostProcessesMatching(`sleep ${tag}`)).toEqual([]);
    expect((await h.sh(lease, "echo still-usable")).stdout).toBe("still-usable\n");
    await h.release(lease);
  });

  it("cancelActiveWork does not wait for a running command; a plain release drains it", async () => {
    const cancelled = await h.acquire();
    const running = h.sh(cancelled, "sleep 30; echo finished");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    const receipt = await h.release(cancelled, { cancelActiveWork: true });
    // A bound far from the alternative (a slow machine is not a failure): draining the command takes 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(receipt).toEqual({ providerLeaseId: cancelled.providerLeaseId, state: "destroyed" });
    const result = await running;
    expect(result.exitCode).toBeNull();
    expect(result.stdout).toBe("");

    const drained = await h.acquire();
    const finishing = h.sh(drained, "sleep 0.5; echo finished");
    await new Promise((resolve) => setTimeout(resolve, 100));
    await h.release(drained);
    expect((await finishing).stdout).toBe("finished\n");
  });

  it("reusable lease: release stops it and keeps its disk, resume restarts it under the same id", async () => {
    const reuseConfig = { ...h.config, reuseLease: true };
    // As the host sends it: a kept lease belongs to one agent and one execution workspace.
    const reuseParams = { runId: "run-reuse", agentId: "agent-test", executionWorkspaceId: "ws-test" };
    const lease = await h.client.env.acquireLease({ ...h.base(reuseConfig), ...reuseParams });
    const tag = marker();
    await h.client.env.execute({ ...h.base(reuseConfig), lease, command: "sh", args: ["-c", `echo kept > kept.txt; nohup sleep ${tag} >/dev/null 2>&1 &`] });
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${tag}`),
        (pids) => pids.length === 1,
      ),
    ).toHaveLength(1);
    const stopped = await h.client.env.releaseLease({ ...h.base(reuseConfig), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    expect(stopped).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(hostProcessesMatching(`sleep ${tag}`)).toEqual([]);

    const resumed = await h.client.env.resumeLease({ ...h.base(reuseConfig), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(resumed.metadata?.remoteCwd).toBe("/workspace");
    const read = await h.client.env.execute({ ...h.base(reuseConfig), lease: resumed, command: "cat", args: ["kept.txt"] });
    expect(read.stdout).toBe("kept\n");

    // A different sandbox shape (here: a pids limit) must not reuse this lease: it is destroyed.
    await h.client.env.releaseLease({ ...h.base(reuseConfig), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    const other = await h.client.env.resumeLease({ ...h.base({ ...reuseConfig, pids: 100 }), providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
    expect(other).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(fs.existsSync(path.join(h.stateDir, "leases", lease.providerLeaseId!))).toBe(false);

    // A tampered sentinel in the workspace breaks identity too.
    const second = await h.client.env.acquireLease({ ...h.base(reuseConfig), ...reuseParams });
    await h.client.env.releaseLease({ ...h.base(reuseConfig), providerLeaseId: second.providerLeaseId, leaseMetadata: second.metadata });
    fs.writeFileSync(path.join(h.stateDir, "leases", second.providerLeaseId!, "disk", "workspace", ".paperclip-runtime/reusable-sandbox-lease.json"), "{}");
    const tampered = await h.client.env.resumeLease({ ...h.base(reuseConfig), providerLeaseId: second.providerLeaseId!, leaseMetadata: second.metadata });
    expect(tampered).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    const destroyed = await h.client.env.destroyLease({ ...h.base(reuseConfig), providerLeaseId: second.providerLeaseId });
    expect(destroyed).toEqual({ providerLeaseId: second.providerLeaseId, state: "destroyed" });
  });

  it("enforces requestedExpiresAt itself: the jail ends at expiry, and the orphan is found and reaped", async () => {
    const requested = new Date(Date.now() + 2_000).toISOString();
    const lease = await h.acquire({ requestedExpiresAt: requested });
    expect(Date.parse(lease.expiresAt!)).toBeLessThanOrEqual(Date.parse(requested));
    const tag = marker();
    await h.sh(lease, `nohup sleep ${tag} >/dev/null 2>&1 &`);
    expect(
      await eventually(
        () => hostProcessesMatching(`sleep ${tag}`),
        (pids) => pids.length === 1,
      ),
    ).toHaveLength(1);
    // The owner goes away too, so the leak clean-up must be the one to find it.
    await h.restartWorker("SIGKILL");
    const gone = await eventually(
      () => hostProcessesMatching(`sleep ${tag}`),
      (pids) => pids.length === 0,
      6_000,
    );
    expect(gone).toEqual([]);
    await expect(h.sh(lease, "true")).rejects.toThrow(/not running/);
    const orphans = await findOrphans(h.stateDir);
    expect(orphans.map((o) => o.leaseId)).toContain(lease.providerLeaseId);
    await reapLease(lease.providerLeaseId!, h.stateDir);
    expect((await listLeaseDirectories(h.stateDir)).map((l) => l.leaseId)).not.toContain(lease.providerLeaseId);
  });

  it("lists a live lease with its owner and does not count it as an orphan", async () => {
    const lease = await h.acquire();
    const listed = (await listLeaseDirectories(h.stateDir)).find((l) => l.leaseId === lease.providerLeaseId);
    expect(listed).toMatchObject({ ownerAlive: true, jailAlive: true, expired: false });
    expect((await findOrphans(h.stateDir)).map((o) => o.leaseId)).not.toContain(lease.providerLeaseId);
    await h.release(lease);
  });
});

describe("probe", () => {
  it("reports each prerequisite as its own diagnostic", async () => {
    const result = await h.client.env.probe({ ...h.base() });
    const codes = (result.diagnostics ?? []).map((d) => d.code);
    expect(result.ok).toBe(true);
    for (const code of ["BWRAP_FOUND", "USERNS_OK", "STATE_DIR_OK", "TOOL_SH_OK", "TOOL_NODE_OK", "TOOL_TAR_OK"]) expect(codes).toContain(code);
  });

  it("names how to install bubblewrap when it is missing, and what a rootfs lacks", async () => {
    const config = providerConfig.parse({ stateDir: h.stateDir, rootfs: "/nonexistent-rootfs" });
    const result = await probeBubblewrap(config, { bwrapPath: null, supervisorScript: "/x", nodeBinary: process.execPath });
    expect(result.ok).toBe(false);
    const byCode = new Map((result.diagnostics ?? []).map((d) => [d.code, d]));
    expect(byCode.get("BWRAP_MISSING")?.message).toMatch(/apt-get install bubblewrap/);
    expect(byCode.get("ROOTFS_MISSING")?.severity).toBe("error");
  });

  it("reports the disk limit enforced as root, and not enforced, saying why, where it cannot be", async () => {
    const config = { ...h.config, diskMb: 100 };
    const result = await h.client.env.probe({ ...h.base(config) });
    const byCode = new Map((result.diagnostics ?? []).map((d) => [d.code, d]));
    const validation = await h.client.env.validateConfig({ driverKey: "bubblewrap", config });
    if (process.getuid?.() === 0) {
      expect(byCode.get("DISK_LIMIT_OK")).toMatchObject({ severity: "info", message: expect.stringMatching(/^disk limit enforced: each lease gets its own 100 MiB filesystem/) });
      expect(byCode.has("DISK_LIMIT_NOT_ENFORCED")).toBe(false);
      expect(result.summary).not.toMatch(/disk/);
      expect(validation.warnings).toEqual([]);
    } else {
      expect(byCode.get("DISK_LIMIT_NOT_ENFORCED")).toMatchObject({
        severity: "warning",
        message: expect.stringMatching(/^diskMb 100 MiB is not enforced: a per-sandbox filesystem needs a root worker \(this one is uid \d+\)/),
      });
      // The host shows the summary only: the warning must be in it, with the reason.
      expect(result.summary).toMatch(/disk limit NOT enforced: diskMb 100 MiB \(a per-sandbox filesystem needs a root worker \(this one is uid \d+\)\)/);
      expect(validation.warnings).toEqual([expect.stringMatching(/^Disk limit \(MiB\) cannot be enforced on this worker: a per-sandbox filesystem needs a root worker/)]);
    }
  });

  it("warns, naming the limits, when cgroups cannot be created", async () => {
    const result = await h.client.env.probe({ ...h.base({ ...h.config, memoryMb: 256, pids: 128 }) });
    const warnings = (result.diagnostics ?? []).filter((d) => d.severity === "warning");
    if (process.getuid?.() !== 0) {
      expect(warnings.find((d) => d.code === "LIMITS_NOT_ENFORCED")?.message).toMatch(/memoryMb, pids/);
      expect(result.summary).toMatch(/limits NOT enforced: memoryMb, pids \(the worker cannot create cgroups\)/);
    }
  });
});
