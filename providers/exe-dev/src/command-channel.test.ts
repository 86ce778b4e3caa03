// The kit's command channel on exe.dev VMs (the emulator's real OpenSSH servers, the plugin in
// process), with faults made for real: the in-sandbox multiplexer killed mid-command, its SSH
// channel refused before its hello, the connection cut under it, a command flooding its output
// while others run.
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { closeCommandChannel, commandChannelStatus } from "@paperclip-sandbox/kit";
import { useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { runIdentity, startHarness, type Harness } from "./__fixtures__/harness.js";

let h: Harness;
const channelSwitch = useCommandChannelSwitch();
beforeAll(async () => {
  h = await startHarness();
}, 60_000);
afterAll(async () => {
  await h?.close();
}, 60_000);

const TEST_MS = 120_000;
const status = (lease: PluginEnvironmentLease) => commandChannelStatus(lease.providerLeaseId!);
const ready = (lease: PluginEnvironmentLease) => vi.waitFor(() => expect(status(lease).state).toBe("ready"), { timeout: 30_000, interval: 50 });
/** SSH sessions (channels) opened on the lease's VM since `mark`, the long-lived one included. */
const sessions = (lease: PluginEnvironmentLease, mark: number) =>
  h.emu.requests.list({ since: mark, protocol: "ssh", method: "EXEC", includeRunning: true }).filter((r) => r.path === lease.providerLeaseId).length;
/** The channel is back once a later command finds it ready (it restarts on a command, after its delay). */
const comesBack = (lease: PluginEnvironmentLease) =>
  vi.waitFor(
    async () => {
      expect((await h.sh(lease, "true")).exitCode).toBe(0);
      expect(status(lease).state).toBe("ready");
    },
    { timeout: 30_000, interval: 200 },
  );

/** This worker's ssh processes (masters and channel clients) for the harness's runtime directory. */
const sshProcesses = () =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      } catch {
        return "";
      }
    })
    .filter((cmdline) => /^\S*ssh /.test(cmdline) && cmdline.includes(h.runtimeParent));

/** A test on a fresh lease whose channel is ready: released after it, and nothing left behind. */
function onReadyLease(name: string, test: (lease: PluginEnvironmentLease) => Promise<void>): void {
  it(
    name,
    async () => {
      const lease = await h.acquire();
      try {
        await ready(lease);
        await test(lease);
      } finally {
        await h.release(lease);
      }
      expect(await h.emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );
}

describe("exe-dev: the command channel under faults", () => {
  onReadyLease("a steady command opens no SSH channel: it rides the lease's one long-lived channel", async (lease) => {
    await h.sh(lease, "true");
    const mark = h.emu.requests.mark();
    const outs = [];
    for (const word of ["one", "two", "three"]) outs.push((await h.sh(lease, `echo ${word}`)).stdout);
    expect(outs).toEqual(["one\n", "two\n", "three\n"]);
    expect(sessions(lease, mark)).toBe(0);
    expect(status(lease).overChannel).toBeGreaterThanOrEqual(4);
  });

  onReadyLease("the multiplexer killed mid-command: that command fails as lost with its group ended; the next runs; the channel comes back", async (lease) => {
    const victim = h.sh(lease, "echo $$ > victim.pid; sleep 60");
    await vi.waitFor(async () => expect((await h.sh(lease, "cat victim.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
    const pid = (await h.sh(lease, "cat victim.pid")).stdout.trim();
    // The killer runs over the channel too: its parent is the multiplexer.
    await expect(h.sh(lease, "kill -9 $PPID")).rejects.toThrow(/command channel broke/);
    await expect(victim).rejects.toThrow(/command channel broke/);
    expect((await h.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n");
    await comesBack(lease);
    expect(status(lease).breaks).toBe(1);
    expect((await h.sh(lease, "echo over")).stdout).toBe("over\n");
  });

  it(
    "the channel's SSH session refused before its hello: the command runs as a channel of its own, once",
    async () => {
      // The lease's first session is the channel's (it waits for it): sshd's side ends it with 255 and
      // no output. The acquire's workspace command then runs as a session of its own.
      h.emu.control.failSessions(1);
      const lease = await h.acquire();
      try {
        expect(status(lease).starts).toBeGreaterThanOrEqual(1);
        expect((await h.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
        await comesBack(lease);
        expect((await h.sh(lease, "cat ran.log")).stdout).toBe("once\n");
      } finally {
        h.emu.control.failSessions(0);
        await h.release(lease);
      }
      expect(await h.emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );

  onReadyLease("the SSH connection cut under a running command: it fails as lost, the next runs once on a new connection, the channel comes back", async (lease) => {
    const host = h.emu.control.sshHost(lease.providerLeaseId!)!;
    const running = h.sh(lease, "echo $$ > cut.pid; sleep 60");
    await vi.waitFor(async () => expect((await h.sh(lease, "cat cut.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
    const pid = (await h.sh(lease, "cat cut.pid")).stdout.trim();
    expect(host.dropConnections()).toBeGreaterThanOrEqual(1);
    await expect(running).rejects.toThrow(/command channel broke|connection was lost/);
    expect((await h.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
    await comesBack(lease);
    expect((await h.sh(lease, "cat ran.log")).stdout).toBe("once\n");
    // The command the cut left behind does not run on.
    await vi.waitFor(async () => expect((await h.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n"), { timeout: 20_000, interval: 200 });
    expect(host.connections).toBeGreaterThanOrEqual(2);
  });

  onReadyLease("a command ended by a signal reports what a fresh exec reports for it (128 + n, no signal)", async (lease) => {
    const outcome = async () => {
      const result = await h.sh(lease, "echo before; kill -KILL $$");
      return { exitCode: result.exitCode, signal: (result as { signal?: unknown }).signal ?? null, stdout: result.stdout };
    };
    const overChannel = await outcome();
    expect(status(lease).overChannel).toBeGreaterThanOrEqual(1);
    const fresh = await channelSwitch.during("off", outcome);
    expect(overChannel).toEqual(fresh);
    expect(fresh).toEqual({ exitCode: 137, signal: null, stdout: "before\n" });
  });

  onReadyLease("a command flooding its output does not hold the others, and every byte arrives", async (lease) => {
    const flood = h.sh(lease, "head -c 8388608 /dev/zero | tr '\\0' a; echo");
    const quick = await Promise.all([1, 2, 3].map((i) => h.sh(lease, `echo quick${i}`)));
    expect(quick.map((q) => q.stdout)).toEqual(["quick1\n", "quick2\n", "quick3\n"]);
    const big = await flood;
    expect(big.exitCode).toBe(0);
    expect(big.stdout.length).toBe(8 * 1024 * 1024 + 1);
    expect(status(lease).overChannel).toBeGreaterThanOrEqual(4);
  });

  it(
    "reuse: the release of a kept lease lets a command of the run that resumed it finish, and destroy leaves no ssh process",
    async () => {
      // The host's warm handoff: the next run resumes the kept lease and runs commands while the
      // previous run's release is still arriving; that release ends the channel (what it does to the
      // lease's channel, without the drain of the entry's own work). Longer than the close timeout (5 s).
      const config = { ...h.config, reuseLease: true };
      const lease = await h.acquire(config, runIdentity);
      let destroyed = false;
      try {
        await ready(lease);
        const resumed = await h.resume(lease, config);
        expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
        const long = h.sh(resumed, "echo $$ > long.pid; sleep 7; echo survived", { config });
        await vi.waitFor(async () => expect((await h.sh(resumed, "cat long.pid 2>/dev/null", { config })).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
        await closeCommandChannel(lease.providerLeaseId!);
        const result = await long;
        expect({ exitCode: result.exitCode, stdout: result.stdout }).toEqual({ exitCode: 0, stdout: "survived\n" });
        // The resumed run goes on (its next channel starts on a later command).
        expect((await h.sh(resumed, "echo next", { config })).stdout).toBe("next\n");
        await h.destroy(resumed, config);
        destroyed = true;
        await vi.waitFor(() => expect(sshProcesses()).toEqual([]), { timeout: 20_000, interval: 200 });
      } finally {
        if (!destroyed) await h.destroy(lease, config).catch(() => undefined);
      }
      expect(await h.emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );
});
