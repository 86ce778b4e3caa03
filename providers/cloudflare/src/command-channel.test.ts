// The kit's command channel through this repository's bridge (run for real in workerd, the plugin in
// process), with faults made for real: the in-sandbox multiplexer killed mid-command, the channel's
// stream cut before its hello, a command flooding its output while others run. Its input travels
// as the bridge's stdin parts (one `PUT /exec/{id}/stdin` per command), so a steady command is one
// bridge request either way; what the channel saves is the process start behind `POST /exec`.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { hostFor } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { COMMAND_CHANNEL_SWITCH, commandChannelStatus } from "@paperclip-sandbox/kit";
import { createCloudflarePlugin } from "./plugin.js";

const emu = await runEmulator(emulator, {});
const host = hostFor(createCloudflarePlugin(), { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token!, timeoutMs: 120_000 }, { driverKey: "cloudflare" });
const switchBefore = process.env[COMMAND_CHANNEL_SWITCH];
beforeAll(() => {
  // Every command waits for the channel, so each test knows which path a command takes.
  process.env[COMMAND_CHANNEL_SWITCH] = "always";
});
afterAll(async () => {
  if (switchBefore === undefined) delete process.env[COMMAND_CHANNEL_SWITCH];
  else process.env[COMMAND_CHANNEL_SWITCH] = switchBefore;
  await host.shutdown();
  await emu.close();
}, 60_000);

const TEST_MS = 120_000;
const EXEC = "/api/paperclip-sandbox/v1/exec";
const status = (lease: PluginEnvironmentLease) => commandChannelStatus(lease.providerLeaseId!);
/** The bridge's acquire makes the workspace itself: the lease's first command starts its channel (and waits for it). */
const ready = async (lease: PluginEnvironmentLease) => {
  expect((await host.sh(lease, "true")).exitCode).toBe(0);
  await vi.waitFor(() => expect(status(lease).state).toBe("ready"), { timeout: 30_000, interval: 50 });
};
/** The channel is back once a later command finds it ready (it restarts on a command, after its delay). */
const comesBack = (lease: PluginEnvironmentLease) =>
  vi.waitFor(
    async () => {
      expect((await host.sh(lease, "true")).exitCode).toBe(0);
      expect(status(lease).state).toBe("ready");
    },
    { timeout: 30_000, interval: 200 },
  );
/** Multiplexers running in the sandbox (the channel names its process). */
const multiplexers = async (lease: PluginEnvironmentLease) => Number((await host.sh(lease, "ps -eo args | grep -c '^[p]aperclip-channel'")).stdout.trim());

describe("cloudflare: the command channel under faults", () => {
  it(
    "a steady command starts no process at the bridge: its input is one stdin part of the lease's one stream",
    async () => {
      const lease = await host.acquire();
      try {
        await ready(lease);
        await host.sh(lease, "true");
        const mark = emu.requests.mark();
        const outs = [];
        for (const word of ["one", "two", "three"]) outs.push((await host.sh(lease, `echo ${word}`)).stdout);
        expect(outs).toEqual(["one\n", "two\n", "three\n"]);
        const bridge = emu.requests.list({ since: mark, includeRunning: true }).filter((r) => !r.path.startsWith("/c/"));
        expect(bridge.filter((r) => r.route === EXEC)).toEqual([]);
        expect(bridge.length).toBeGreaterThanOrEqual(3);
        expect(bridge.every((r) => r.method === "PUT" && r.path.includes("/stdin"))).toBe(true);
      } finally {
        await host.release(lease);
      }
      expect(await emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );

  it(
    "the multiplexer killed mid-command: that command fails as lost with its group ended; the next runs; the channel comes back",
    async () => {
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
        await comesBack(lease);
        expect(status(lease).breaks).toBe(1);
        expect(await multiplexers(lease)).toBe(1);
        expect((await host.sh(lease, "echo over")).stdout).toBe("over\n");
      } finally {
        await host.release(lease);
      }
      expect(await emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );

  it(
    "the channel's stream cut before its hello: the command runs as a process of its own, once, and no multiplexer is left running",
    async () => {
      const lease = await host.acquire();
      try {
        // The lease's first command waits for the channel: its `POST /exec` is cut after the answer's
        // head. The command then runs as a streamed process of its own.
        emu.faults.inject({ kind: "reset", route: EXEC, method: "POST", times: 1 });
        expect((await host.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
        expect(status(lease).starts).toBeGreaterThanOrEqual(1);
        await comesBack(lease);
        expect((await host.sh(lease, "cat ran.log")).stdout).toBe("once\n");
        // The cut one was ended by the bridge (its client went away): only the live channel runs.
        await vi.waitFor(async () => expect(await multiplexers(lease)).toBe(1), { timeout: 20_000, interval: 200 });
      } finally {
        emu.faults.clear();
        await host.release(lease);
      }
      expect(await emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );

  it(
    "a command ended by a signal reports what a fresh exec reports for it (128 + n, no signal)",
    async () => {
      const lease = await host.acquire();
      const outcome = async () => {
        const result = await host.sh(lease, "echo before; kill -KILL $$");
        return { exitCode: result.exitCode, signal: (result as { signal?: unknown }).signal ?? null, stdout: result.stdout };
      };
      try {
        await ready(lease);
        const overChannel = await outcome();
        expect(status(lease).overChannel).toBeGreaterThanOrEqual(1);
        process.env[COMMAND_CHANNEL_SWITCH] = "off";
        const fresh = await outcome();
        expect(overChannel).toEqual(fresh);
        expect(fresh).toEqual({ exitCode: 137, signal: null, stdout: "before\n" });
      } finally {
        process.env[COMMAND_CHANNEL_SWITCH] = "always";
        await host.release(lease);
      }
      expect(await emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );

  it(
    "a command flooding its output does not hold the others, and every byte arrives",
    async () => {
      const lease = await host.acquire();
      try {
        await ready(lease);
        const flood = host.sh(lease, "head -c 4194304 /dev/zero | tr '\\0' a; echo");
        const quick = await Promise.all([1, 2, 3].map((i) => host.sh(lease, `echo quick${i}`)));
        expect(quick.map((q) => q.stdout)).toEqual(["quick1\n", "quick2\n", "quick3\n"]);
        const big = await flood;
        expect(big.exitCode).toBe(0);
        expect(big.stdout.length).toBe(4 * 1024 * 1024 + 1);
        expect(status(lease).overChannel).toBeGreaterThanOrEqual(4);
      } finally {
        await host.release(lease);
      }
      expect(await emu.leftovers()).toEqual([]);
    },
    TEST_MS,
  );
});
