// The modal plugin's hooks in-process, with the real SDK against the Modal emulator: what the
// conformance suite cannot see (vendor calls per operation, the argv limit, timeout rounding,
// both reuse modes, the billing warning).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { COMMAND_CHANNEL_SWITCH } from "@paperclip-sandbox/kit";
import { hostFor, type InProcessHost } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-modal";
import { execTimeoutSeconds, MODAL_ARGV_LIMIT } from "./transport.js";
import { createModalPlugin } from "./plugin.js";

let emu: RunningEmulator;
let config: Record<string, unknown>;
const plugins: Array<ReturnType<typeof createModalPlugin>> = [];

beforeAll(async () => {
  emu = await runEmulator(emulator, {});
  config = { tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "plugin-test" };
});

afterAll(async () => {
  for (const plugin of plugins) plugin.accounts.closeAll();
  await emu?.close();
});

/** A fresh plugin (a fresh worker) driven as the host does; `after` keeps another host's identity (the worker after a restart). */
function start(leaseConfig: Record<string, unknown> = config, after?: InProcessHost): InProcessHost {
  const plugin = createModalPlugin({ env: {} });
  plugins.push(plugin);
  return after ? after.withPlugin(plugin.provider.plugin) : hostFor(plugin.provider.plugin, leaseConfig, { driverKey: "modal" });
}

/**
 * The calls `work` made. Not `requests.idle()`: a lease's command channel is an exec that runs as
 * long as it lives; calls are counted as they arrive, once none has come for 100 ms.
 */
async function callsDuring<T>(work: () => Promise<T>): Promise<{ result: T; calls: string[] }> {
  await quiet();
  const mark = emu.requests.mark();
  const result = await work();
  await quiet();
  return { result, calls: emu.requests.list({ since: mark, includeRunning: true }).map((call) => call.path.split("/").pop()!) };
}

async function quiet(): Promise<void> {
  for (let seen = -1; ; ) {
    const now = emu.requests.mark();
    if (now === seen) return;
    seen = now;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs the test with the kit's command channel switched (`off`: every command an exec of its own). */
function channelSwitch(value: "off" | "always"): void {
  const before = process.env[COMMAND_CHANNEL_SWITCH];
  process.env[COMMAND_CHANNEL_SWITCH] = value;
  onTestFinished(() => {
    if (before === undefined) delete process.env[COMMAND_CHANNEL_SWITCH];
    else process.env[COMMAND_CHANNEL_SWITCH] = before;
  });
}

describe("modal plugin against the emulator", () => {
  it("rounds command timeouts up to whole seconds (at least one) and reports them as timedOut", async () => {
    expect([1, 999, 1000, 1001, 1200, 59_999].map(execTimeoutSeconds)).toEqual([1, 1, 1, 2, 2, 60]);
    channelSwitch("off"); // Modal's own exec deadline (over the command channel the deadline is exact)
    const host = start();
    const lease = await host.acquire();
    try {
      // 1.2 s becomes Modal's 2 s: the command is ended at 2 s, not at 1 s.
      let started = Date.now();
      const rounded = await host.execute(lease, "sh", ["-c", "echo started; sleep 10"], { timeoutMs: 1_200 });
      const roundedMs = Date.now() - started;
      expect(rounded).toMatchObject({ exitCode: null, timedOut: true, stdout: "started\n" });
      expect(roundedMs).toBeGreaterThanOrEqual(1_900);
      expect(roundedMs).toBeLessThan(8_000);
      // 300 ms becomes the 1 s minimum.
      started = Date.now();
      const minimum = await host.execute(lease, "sleep", ["10"], { timeoutMs: 300 });
      expect(minimum).toMatchObject({ exitCode: null, timedOut: true });
      expect(Date.now() - started).toBeGreaterThanOrEqual(950);
      // The whole group ended with it.
      const after = await host.execute(lease, "sh", ["-c", "ps -eo args | grep -c '[s]leep 10' || true"]);
      expect(after.stdout.trim()).toBe("0");
    } finally {
      await host.destroy(lease);
    }
  });

  it("refuses a command over Modal's 64 KiB argv before any vendor call", async () => {
    const host = start();
    const lease = await host.acquire();
    try {
      const huge = "x".repeat(MODAL_ARGV_LIMIT);
      const { result, calls } = await callsDuring(() =>
        host.execute(lease, "echo", [huge]).then(
          () => "ran",
          (error: Error) => error.message,
        ),
      );
      expect(result).toMatch(/bytes of arguments; Modal's exec takes at most 65536 \(nothing was sent\)/);
      expect(calls).toEqual([]);
      // Just under the limit still runs.
      const fits = await host.execute(lease, "sh", ["-c", 'printf %s "$1" | wc -c', "sh", "y".repeat(50_000)]);
      expect(fits.stdout.trim()).toBe("50000");
    } finally {
      await host.destroy(lease);
    }
  });

  it("costs 4 gRPC calls per plain execute, 5 with stdin, and one exec per sync operation of a file", async () => {
    channelSwitch("off");
    const host = start();
    const lease = await host.acquire();
    try {
      const plain = await callsDuring(() => host.execute(lease, "true"));
      expect(plain.calls.sort()).toEqual(["TaskExecStart", "TaskExecStdioRead", "TaskExecStdioRead", "TaskExecWait"]);
      const withStdin = await callsDuring(() => host.execute(lease, "cat", [], { stdin: "hello" }));
      expect(withStdin.result.stdout).toBe("hello");
      expect(withStdin.calls.sort()).toEqual(["TaskExecStart", "TaskExecStdinWriteStream", "TaskExecStdioRead", "TaskExecStdioRead", "TaskExecWait"]);

      const dir = mkdtempSync(join(tmpdir(), "modal-sync-"));
      try {
        writeFileSync(join(dir, "in.txt"), "synced");
        const remote = `${lease.metadata?.remoteCwd as string}/in.txt`;
        const hooks = await host.hooks();
        const scope = { driverKey: "modal", companyId: host.identity.companyId, environmentId: host.identity.environmentId, config };
        const syncIn = await callsDuring(() =>
          hooks.onEnvironmentSyncIn({ ...scope, lease, operations: [{ operationId: "in", files: [{ sourcePath: join(dir, "in.txt"), targetPath: remote, kind: "file" }] }] }),
        );
        expect(syncIn.calls.filter((call) => call === "TaskExecStart")).toHaveLength(1);
        const syncOut = await callsDuring(() =>
          hooks.onEnvironmentSyncOut({ ...scope, lease, operations: [{ operationId: "out", files: [{ sourcePath: remote, targetPath: join(dir, "out.txt"), kind: "file" }] }] }),
        );
        expect(syncOut.calls.filter((call) => call === "TaskExecStart")).toHaveLength(1);
        expect(readFileSync(join(dir, "out.txt"), "utf8")).toBe("synced");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      await host.destroy(lease);
    }
  });

  it("over the command channel a warm execute, with stdin or without, costs no gRPC call, and a timeout ends its group", async () => {
    channelSwitch("always");
    const host = start();
    const lease = await host.acquire();
    try {
      const plain = await callsDuring(() => host.execute(lease, "true"));
      expect(plain.result.exitCode).toBe(0);
      expect(plain.calls).toEqual([]);
      const withStdin = await callsDuring(() => host.execute(lease, "cat", [], { stdin: "hello" }));
      expect(withStdin.result.stdout).toBe("hello");
      expect(withStdin.calls).toEqual([]);
      const timed = await host.execute(lease, "sh", ["-c", "echo started; sleep 10 & sleep 10"], { timeoutMs: 1_200 });
      expect(timed).toMatchObject({ exitCode: null, timedOut: true, stdout: "started\n" });
      const after = await host.execute(lease, "sh", ["-c", "ps -eo args | grep -c '[s]leep 10' || true"]);
      expect(after.stdout.trim()).toBe("0");
    } finally {
      await host.destroy(lease);
    }
  });

  it("keeps a reused lease running at release (billed), warns about it in the probe, and resumes it by id", async () => {
    const reuse = { ...config, reuseLease: true };
    const host = start(reuse);
    const probe = await host.probe();
    expect(probe.ok).toBe(true);
    expect(probe.summary).toBe("modal sandbox ready — reused leases keep running and are billed while idle (Modal has no pause)");
    expect(probe.diagnostics?.find((d) => d.code === "MODAL_REUSE_BILLS_WHILE_IDLE")?.message).toMatch(/billed until its sandbox timeout \(3600 s\)/);
    expect((await host.probe({ reuseVia: "snapshot" })).summary).toBe("modal sandbox ready");

    const lease = await host.acquire();
    expect(await host.sh(lease, "nohup sleep 300 >/dev/null 2>&1 & echo started")).toMatchObject({ exitCode: 0 });
    expect(await host.release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(await emu.leftovers()).toHaveLength(1); // still running, still billed

    const fresh = start(reuse, host);
    const resumed = await fresh.resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    const still = await fresh.sh(resumed, "ps -eo args | grep -c '[s]leep 300'");
    expect(still.stdout.trim()).toBe("1"); // processes survive: the sandbox never stopped
    await fresh.destroy(resumed);
    expect(await emu.leftovers()).toEqual([]);
  });

  it("with reuseVia snapshot: release snapshots and ends the sandbox; resume keeps a file and a tool from the first run, not its processes", async () => {
    const snap = { ...config, reuseLease: true, reuseVia: "snapshot" };
    const host = start(snap);
    const lease = await host.acquire();
    expect(lease.providerLeaseId).toMatch(/^snapshot:pc-[0-9a-f]{20}$/);
    const install = [
      "echo 'kept across runs' > notes.txt",
      "mkdir -p $HOME/.local/bin",
      "printf '#!/bin/sh\\necho tool v1 works\\n' > $HOME/.local/bin/mytool",
      "chmod +x $HOME/.local/bin/mytool",
      "nohup sleep 300 >/dev/null 2>&1 &",
    ].join(" && ");
    expect(await host.sh(lease, install)).toMatchObject({ exitCode: 0 });

    expect(await host.release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    const kept = await emu.leftovers();
    expect(kept).toHaveLength(1);
    expect(kept[0]).toMatch(/^image im-\S+ \(filesystem snapshot\)$/); // no sandbox runs (none billed), one image

    const fresh = start(snap, host);
    const resumed = await fresh.resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(resumed.metadata?.sandboxId).not.toBe(lease.metadata?.sandboxId);
    const check = await fresh.sh(resumed, "cat notes.txt; $HOME/.local/bin/mytool; ps -eo args | grep -c '[s]leep 300' || true");
    expect(check).toMatchObject({ exitCode: 0, stdout: "kept across runs\ntool v1 works\n0\n" });

    // A second cycle: a newer snapshot replaces the one the sandbox started from.
    expect(await fresh.sh(resumed, "echo second >> notes.txt")).toMatchObject({ exitCode: 0 });
    expect(await fresh.release(resumed)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    const second = await emu.leftovers();
    expect(second).toHaveLength(1);
    expect(second).not.toEqual(kept);
    const third = start(snap, host);
    const again = await third.resume(lease);
    expect((await third.execute(again, "cat", ["notes.txt"])).stdout).toBe("kept across runs\nsecond\n");

    await third.destroy(again);
    expect(await emu.leftovers()).toEqual([]);
  });
});
