// The kit's command channel in Coder workspaces over the default transport (the runner app's stream
// route through the Coder emulator's app proxy, the provider in process): its stream cut before its
// hello (a channel closed first: the app proxy's first stream is not the channel's), and a reused
// lease's release ending its channel. The shared faults are conformance cases.
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { hostFor, useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { closeCommandChannel, commandChannelStatus } from "@paperclip-sandbox/kit";
import { startCoderEmulator } from "./__fixtures__/emulator.js";
import { createCoderPlugin } from "./plugin.js";

/** The emulator's app-proxy route (path-based apps), as its recorder names it. */
const APP_ROUTE = "/:owner/:workspace/apps/:slug/*rest";
const world = await startCoderEmulator();
const { emu } = world;
useCommandChannelSwitch();
afterAll(async () => {
  await emu.close();
}, 120_000);
afterEach(() => emu.faults.clear());

const host = (extra: Record<string, unknown> = {}) => hostFor(createCoderPlugin({ env: {} }), { ...world.config, timeoutMs: 120_000, ...extra }, { driverKey: "coder" });
const id = (lease: PluginEnvironmentLease) => lease.providerLeaseId!;
const ready = (lease: PluginEnvironmentLease) => vi.waitFor(() => expect(commandChannelStatus(id(lease)).state).toBe("ready"), { timeout: 30_000, interval: 50 });
const openStreams = () => emu.requests.list({ includeRunning: true }).filter((r) => r.protocol === "ws" && r.route === APP_ROUTE && !r.done);

describe("coder (app-proxy): the command channel under faults", () => {
  it("the channel's stream cut before its hello: the command runs over a stream of its own, once", async () => {
    const h = host();
    const lease = await h.acquire();
    try {
      await ready(lease);
      // The next channel's stream is cut after the runner's STARTED, before the multiplexer's hello.
      await closeCommandChannel(id(lease));
      const mark = emu.requests.mark();
      emu.faults.inject({ kind: "drop-stream", route: APP_ROUTE, afterMessages: 1, times: 1 });
      expect((await h.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
      expect(emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.faults.includes("drop-stream"))).toHaveLength(1);
      await vi.waitFor(
        async () => {
          expect((await h.sh(lease, "true")).exitCode).toBe(0);
          expect(commandChannelStatus(id(lease)).state).toBe("ready");
        },
        { timeout: 30_000, interval: 200 },
      );
      expect((await h.sh(lease, "cat ran.log")).stdout).toBe("once\n");
    } finally {
      await h.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("a reused lease's release ends its channel, leaving no stream open", async () => {
    const h = host({ reuseLease: true });
    const lease = await h.acquire();
    try {
      await ready(lease);
      await h.sh(lease, "true");
      expect(openStreams()).toHaveLength(1);
      expect(await h.release(lease)).toMatchObject({ state: "stopped" });
      expect(commandChannelStatus(id(lease)).state).toBe("none");
      // Its socket's closing handshake may still be under way; nothing is left open after it.
      await vi.waitFor(() => expect(openStreams()).toEqual([]), { timeout: 30_000, interval: 100 });
    } finally {
      await h.destroy(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });
});
