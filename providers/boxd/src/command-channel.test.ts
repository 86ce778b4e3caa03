// The kit's command channel on boxd machines (the boxd emulator over gRPC, the provider in process):
// what boxd adds to the conformance cases every channel provider runs (multiplexer killed, stream
// cut before its hello, steady commands, flood): the plugin's one gRPC connection cut while a
// command runs, an idle channel closes, and a reused lease's channel ends before the machine is
// suspended.
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { hostFor, useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-boxd";
import { commandChannelStatus } from "@paperclip-sandbox/kit";
import { boxdConfig } from "./config.js";
import { BOXD_CHANNEL_IDLE_MS, createBoxdPlugin } from "./plugin.js";

const EXEC = "/boxd.api.v1.BoxdApi/Exec";
const emu = await runEmulator(emulator, {});
useCommandChannelSwitch();
afterAll(async () => {
  await emu.close();
});
afterEach(() => emu.faults.clear());

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange!, timeoutMs: 120_000 };

function harness(extra: Record<string, unknown> = {}) {
  const boxd = createBoxdPlugin({ env: {} });
  const host = hostFor(boxd.plugin, { ...config, ...extra }, { driverKey: "boxd" });
  return { host, api: boxd.apiOf(boxdConfig.parse(config)) };
}

const id = (lease: PluginEnvironmentLease) => lease.providerLeaseId!;
const ready = (lease: PluginEnvironmentLease) => vi.waitFor(() => expect(commandChannelStatus(id(lease)).state).toBe("ready"), { timeout: 30_000, interval: 50 });
const runningExecs = () => emu.requests.list({ includeRunning: true }).filter((r) => r.route === EXEC && !r.done);

describe("boxd: the command channel under faults", () => {
  it("the connection cut while a command runs on the channel: it fails as lost, its group is ended, nothing runs twice", async () => {
    const { host, api } = harness();
    const lease = await host.acquire();
    try {
      await ready(lease);
      const victim = host.sh(lease, "echo run >> victim.log; echo $$ > victim.pid; sleep 60");
      await vi.waitFor(async () => expect((await host.sh(lease, "cat victim.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
      const pid = (await host.sh(lease, "cat victim.pid")).stdout.trim();
      // A reset of another call on the plugin's one gRPC connection cuts every stream on it, the channel's Exec too.
      emu.faults.inject({ kind: "reset", route: "/boxd.api.v1.BoxdApi/GetVm", times: 1 });
      await api.getMachine(id(lease)).catch(() => undefined);
      await expect(victim).rejects.toThrow(/command channel broke/);
      expect((await host.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n");
      expect((await host.sh(lease, "cat victim.log")).stdout).toBe("run\n");
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });
});

describe("boxd: the command channel and a machine's idle time", () => {
  it("an idle channel closes on its own, leaving no Exec in flight (boxd's idle timers count commands in flight)", async () => {
    const { host } = harness();
    const lease = await host.acquire();
    try {
      await ready(lease);
      await host.sh(lease, "true");
      expect(runningExecs()).toHaveLength(1);
      await vi.waitFor(() => expect(commandChannelStatus(id(lease)).state).toBe("none"), { timeout: BOXD_CHANNEL_IDLE_MS + 60_000, interval: 200 });
      await vi.waitFor(() => expect(runningExecs()).toEqual([]), { timeout: 30_000, interval: 100 });
      // The next command starts it again.
      expect((await host.sh(lease, "echo back")).stdout).toBe("back\n");
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  }, 120_000);

  it("a reused lease's release ends its channel before the machine is suspended", async () => {
    const { host } = harness({ reuseLease: true });
    const lease = await host.acquire();
    try {
      await ready(lease);
      await host.sh(lease, "true");
      // The channel's Exec is the one call in flight.
      const [open] = runningExecs();
      expect(open).toBeDefined();
      const mark = emu.requests.mark();
      expect(await host.release(lease)).toMatchObject({ state: "stopped" });
      expect(commandChannelStatus(id(lease)).state).toBe("none");
      const calls = emu.requests.list({ includeRunning: true });
      const suspend = calls.find((r) => r.id > mark && r.route === "/boxd.api.v1.BoxdApi/SuspendVm");
      const channel = calls.find((r) => r.id === open!.id);
      expect(suspend).toBeDefined();
      expect(channel?.done).toBe(true);
      // Its end (arrival + duration, ms) is no later than the suspend's arrival.
      expect(channel!.startedAt + channel!.latencyMs).toBeLessThan(suspend!.startedAt + 1);
    } finally {
      await host.destroy(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });
});
