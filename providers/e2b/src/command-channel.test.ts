// The kit's command channel in e2b sandboxes (the envd emulator, the real SDK, in process), with
// faults made for real: the in-sandbox multiplexer killed mid-command, its stream cut before and
// after its hello, a command flooding its output while others run.
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { COMMAND_CHANNEL_SWITCH, commandChannelStatus } from "@paperclip-sandbox/kit";
import { createE2bPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
const switchBefore = process.env[COMMAND_CHANNEL_SWITCH];
beforeAll(() => {
  // Every command waits for the channel, so each test knows which path a command takes.
  process.env[COMMAND_CHANNEL_SWITCH] = "always";
});
afterAll(async () => {
  if (switchBefore === undefined) delete process.env[COMMAND_CHANNEL_SWITCH];
  else process.env[COMMAND_CHANNEL_SWITCH] = switchBefore;
  await emu.close();
});
afterEach(() => emu.faults.clear());

type Hooks = Required<ReturnType<typeof createE2bPlugin>["plugin"]["definition"]>;
interface Lease {
  providerLeaseId: string | null;
  metadata?: Record<string, unknown>;
}
interface Result {
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

function harness() {
  const hooks = createE2bPlugin().plugin.definition as Hooks;
  const suffix = randomUUID().slice(0, 8);
  const base = {
    driverKey: "e2b",
    companyId: `company-${suffix}`,
    environmentId: `environment-${suffix}`,
    config: { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 120_000 },
  };
  return {
    acquire: () => hooks.onEnvironmentAcquireLease({ ...base, runId: `run-${suffix}` }) as Promise<Lease>,
    sh: (lease: Lease, script: string) =>
      hooks.onEnvironmentExecute({ ...base, lease, command: "sh", args: ["-c", script], cwd: lease.metadata?.remoteCwd as string, timeoutMs: 60_000 }) as Promise<Result>,
    release: (lease: Lease) => hooks.onEnvironmentReleaseLease({ ...base, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }),
  };
}

const ready = (lease: Lease) => vi.waitFor(() => expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready"), { timeout: 30_000, interval: 50 });

describe("e2b: the command channel under faults", () => {
  it("the multiplexer killed mid-command: that command fails as lost with its group ended; the next runs; the channel comes back", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      await ready(lease);
      const victim = host.sh(lease, "echo $$ > victim.pid; sleep 60");
      await vi.waitFor(async () => expect((await host.sh(lease, "cat victim.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
      const pid = (await host.sh(lease, "cat victim.pid")).stdout.trim();
      // The killer runs over the channel too: its parent is the multiplexer.
      await expect(host.sh(lease, "kill -9 $PPID")).rejects.toThrow(/command channel broke/);
      await expect(victim).rejects.toThrow(/command channel broke/);
      expect((await host.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n");
      // It comes back on a later command (after its restart delay), not on its own.
      await vi.waitFor(
        async () => {
          expect((await host.sh(lease, "true")).exitCode).toBe(0);
          expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready");
        },
        { timeout: 30_000, interval: 200 },
      );
      expect(commandChannelStatus(lease.providerLeaseId!).breaks).toBe(1);
      expect((await host.sh(lease, "echo over")).stdout).toBe("over\n");
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("the channel's stream cut before its hello: the command runs as a process start of its own, once", async () => {
    const host = harness();
    // The lease's first process start is the channel's (it waits for it): cut it after the start
    // event, before any output. The acquire's workspace command then runs as a start of its own.
    emu.faults.inject({ kind: "drop-stream", route: "/process.Process/Start", afterMessages: 1, times: 1 });
    const lease = await host.acquire();
    try {
      expect(commandChannelStatus(lease.providerLeaseId!).starts).toBeGreaterThanOrEqual(1);
      expect((await host.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
      await vi.waitFor(
        async () => {
          expect((await host.sh(lease, "true")).exitCode).toBe(0);
          expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready");
        },
        { timeout: 30_000, interval: 200 },
      );
      expect((await host.sh(lease, "cat ran.log")).stdout).toBe("once\n");
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("a steady command is no vendor call: the channel's input rides its one StreamInput stream", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      await ready(lease);
      await host.sh(lease, "true");
      const mark = emu.requests.mark();
      const outs = [];
      for (const word of ["one", "two", "three"]) outs.push((await host.sh(lease, `echo ${word}`)).stdout);
      expect(outs).toEqual(["one\n", "two\n", "three\n"]);
      // The lease's timeout refreshes run on their own timer.
      const calls = emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.route !== "/sandboxes/:id/timeout");
      expect(calls.map((r) => r.route)).toEqual([]);
      expect(emu.requests.list({ includeRunning: true }).filter((r) => r.route === "/process.Process/SendInput")).toEqual([]);
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("envd refusing StreamInput: the channel's input goes through SendInput and every command runs once", async () => {
    const host = harness();
    emu.faults.inject({ kind: "status", status: 501, route: "/process.Process/StreamInput" });
    const lease = await host.acquire();
    try {
      await ready(lease);
      const mark = emu.requests.mark();
      expect((await host.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
      expect((await host.sh(lease, "cat ran.log")).stdout).toBe("once\n");
      expect(commandChannelStatus(lease.providerLeaseId!).overChannel).toBeGreaterThanOrEqual(2);
      expect(emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.route === "/process.Process/SendInput").length).toBeGreaterThanOrEqual(2);
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("a command flooding its output does not hold the others, and every byte arrives", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      await ready(lease);
      const flood = host.sh(lease, "head -c 8388608 /dev/zero | tr '\\0' a; echo");
      const quick = await Promise.all([1, 2, 3].map((i) => host.sh(lease, `echo quick${i}`)));
      expect(quick.map((q) => q.stdout)).toEqual(["quick1\n", "quick2\n", "quick3\n"]);
      const big = await flood;
      expect(big.exitCode).toBe(0);
      expect(big.stdout.length).toBe(8 * 1024 * 1024 + 1);
      expect(commandChannelStatus(lease.providerLeaseId!).overChannel).toBeGreaterThanOrEqual(4);
    } finally {
      await host.release(lease);
    }
  });
});
