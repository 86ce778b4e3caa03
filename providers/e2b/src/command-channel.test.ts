// The kit's command channel in e2b sandboxes (the envd emulator, the real SDK, in process): what envd
// adds, the channel's stdin on one StreamInput stream and SendInput when envd refuses it. The faults
// every channel provider shares (multiplexer killed, stream cut, flood) are conformance cases.
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { hostFor, useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { commandChannelStatus } from "@paperclip-sandbox/kit";
import { createE2bPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
useCommandChannelSwitch();
afterAll(async () => {
  await emu.close();
});
afterEach(() => emu.faults.clear());

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 120_000 };

function harness() {
  const host = hostFor(createE2bPlugin().plugin, config, { driverKey: "e2b" });
  return {
    acquire: () => host.acquire(),
    sh: (lease: PluginEnvironmentLease, script: string) => host.sh(lease, script, { timeoutMs: 60_000 }),
    release: (lease: PluginEnvironmentLease) => host.release(lease),
  };
}

const ready = (lease: PluginEnvironmentLease) => vi.waitFor(() => expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready"), { timeout: 30_000, interval: 50 });

describe("e2b: the command channel under faults", () => {
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
});
