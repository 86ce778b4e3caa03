// The kit's command channel on Cloudflare sandboxes (the bridge in workerd, the provider in process):
// its multiplexer on the bridge's terminal route (a raw PTY over one WebSocket) instead of a
// streamed process per command. What this adds to the conformance cases every channel provider
// runs: a warm command makes no bridge request, commands sent to a multiplexer that then dies run
// once (as streamed processes), and release drains and closes the channel.
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { afterAll, describe, expect, it, vi } from "vitest";
import { hostFor, useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { commandChannelStatus } from "@paperclip-sandbox/kit";
import { createCloudflarePlugin } from "./plugin.js";

const PREFIX = "/api/paperclip-sandbox/v1";
const emu = await runEmulator(emulator, {});
const channelSwitch = useCommandChannelSwitch();
afterAll(async () => {
  await emu.close();
}, 60_000);

const config = { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token!, timeoutMs: 120_000 };
const harness = (extra: Record<string, unknown> = {}) => hostFor(createCloudflarePlugin(), { ...config, ...extra }, { driverKey: "cloudflare" });
const id = (lease: PluginEnvironmentLease) => lease.providerLeaseId!;
/** The channel starts with the lease's first command (the bridge's acquire makes the workspace itself: none before). */
const ready = (lease: PluginEnvironmentLease) => vi.waitFor(() => expect(commandChannelStatus(id(lease))).toMatchObject({ state: "ready" }), { timeout: 30_000, interval: 50 });

/** Bridge requests on a route since a mark, running ones too (a streamed request's record ends after its client returns). */
const since = (mark: number, route: string) => emu.requests.list({ since: mark, includeRunning: true }).filter((r) => (r.route ?? r.path) === `${PREFIX}${route}`);

/** Every request but the channel's own terminal socket (the bridge's, and the container's behind it) has finished (`requests.idle()` would wait for that one too). */
const settled = () =>
  vi.waitFor(() => expect(emu.requests.list({ includeRunning: true }).filter((r) => !r.done && !/\/(terminal|ws\/pty)$/.test(r.route ?? r.path))).toEqual([]), { timeout: 10_000, interval: 20 });

/** A command straight through the bridge (`POST /exec`, JSON answer), beside the plugin. */
async function bridgeSh(providerLeaseId: string, script: string): Promise<string> {
  const response = await fetch(`${emu.url}${PREFIX}/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${emu.credentials.token}`, "content-type": "application/json" },
    body: JSON.stringify({ providerLeaseId, command: "sh", args: ["-c", script], sessionId: "inspector", streamOutput: false }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { stdout: string }).stdout;
}

describe("cloudflare: the command channel on the bridge's terminal", () => {
  it("a warm execute makes no POST /exec (a fresh one does)", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      await host.sh(lease, "true");
      await ready(lease);
      await settled();
      const mark = emu.requests.mark();
      const outs: string[] = [];
      for (const word of ["one", "two", "three"]) outs.push((await host.sh(lease, `echo ${word}; cat`, { stdin: word })).stdout);
      expect(outs).toEqual(["one\none", "two\ntwo", "three\nthree"]);
      await settled();
      expect(since(mark, "/exec")).toEqual([]);
      expect(emu.requests.list({ since: mark, includeRunning: true }).map((r) => `${r.method} ${r.route ?? r.path}`)).toEqual([]);
      // The same command with the channel switched off is one streamed process: one POST /exec.
      await channelSwitch.during("off", async () => {
        const fresh = emu.requests.mark();
        expect((await host.sh(lease, "echo fresh")).stdout).toBe("fresh\n");
        await settled();
        expect(since(fresh, "/exec").filter((r) => r.method === "POST")).toHaveLength(1);
      });
      expect(commandChannelStatus(id(lease)).overChannel).toBeGreaterThanOrEqual(4);
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("a command over the channel sees what a streamed process sees: environment, directory, umask, user, no terminal", async () => {
    const host = harness();
    const lease = await host.acquire();
    const probe = "env | grep -v -e '^_=' -e '^SHLVL=' -e '^OLDPWD=' | sort; pwd; tty || true; umask; id -u";
    try {
      await host.sh(lease, "true");
      await ready(lease);
      const over = await host.sh(lease, `${probe}; echo; grep -q "paperclip-chan""nel" /proc/$PPID/cmdline && echo channel`);
      const fresh = await channelSwitch.during("off", () => host.sh(lease, probe));
      expect(over.stdout).toMatch(/\nchannel\n$/);
      expect(over.stdout.replace(/\nchannel\n$/, "")).toBe(fresh.stdout);
      expect(fresh.stdout).toContain("not a tty");
      expect(fresh.stdout).not.toMatch(/^TERM=/m);
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("the channel's terminal dropped before the hello: the command runs once as a streamed process, the channel comes back", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      const mark = emu.requests.mark();
      emu.faults.inject({ kind: "drop-stream", route: `${PREFIX}/terminal`, afterMessages: 0, times: 1 });
      expect((await host.sh(lease, "echo once >> ran.log; cat ran.log")).stdout).toBe("once\n");
      expect(emu.requests.list({ since: mark, includeRunning: true }).filter((r) => r.faults.includes("drop-stream"))).toHaveLength(1);
      await vi.waitFor(async () => expect((await host.sh(lease, `grep -q "paperclip-chan""nel" /proc/$PPID/cmdline && echo channel`)).stdout).toBe("channel\n"), {
        timeout: 30_000,
        interval: 200,
      });
      expect((await host.sh(lease, "cat ran.log")).stdout).toBe("once\n");
    } finally {
      emu.faults.clear();
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("commands the dead multiplexer held: the running one is lost and its group ended, the unstarted ones run once as streamed processes", async () => {
    const host = harness();
    const lease = await host.acquire();
    try {
      await host.sh(lease, "true");
      await ready(lease);
      const mux = commandChannelStatus(id(lease)).pid!;
      expect(mux).toBeGreaterThan(0);
      const victim = host.sh(lease, "echo run >> victim.log; echo $$ > victim.pid; sleep 60");
      victim.catch(() => undefined);
      await vi.waitFor(async () => expect((await host.sh(lease, "cat victim.pid 2>/dev/null")).stdout).toMatch(/^\d+\n$/), { timeout: 20_000, interval: 100 });
      // Stopped, the multiplexer takes the next commands from the terminal but starts none.
      await bridgeSh(id(lease), `kill -STOP ${mux}`);
      const held = [1, 2, 3].map((i) => host.sh(lease, `echo ${i} >> ran.log; echo ok${i}`));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await bridgeSh(id(lease), `kill -KILL ${mux}`);
      await expect(victim).rejects.toThrow(/command channel broke/);
      expect((await Promise.all(held)).map((r) => [r.exitCode, r.stdout])).toEqual([1, 2, 3].map((i) => [0, `ok${i}\n`]));
      await channelSwitch.during("off", async () => {
        expect((await host.sh(lease, "sort ran.log; cat victim.log")).stdout).toBe("1\n2\n3\nrun\n");
        const pid = (await host.sh(lease, "cat victim.pid")).stdout.trim();
        expect((await host.sh(lease, `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout).toBe("gone\n");
      });
      expect(commandChannelStatus(id(lease)).breaks).toBe(1);
    } finally {
      await host.release(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  }, 90_000);

  it("release sends no kill for the channel's finished staging process (a kill on a destroyed lease boots a container)", async () => {
    const host = harness();
    const lease = await host.acquire();
    await host.sh(lease, "true");
    await ready(lease);
    await settled();
    const mark = emu.requests.mark();
    await host.release(lease);
    await settled();
    const made = emu.requests.list({ since: mark, includeRunning: true }).map((r) => `${r.method} ${r.path}`);
    expect(made.filter((line) => line.startsWith(`POST ${PREFIX}/exec/`))).toEqual([]);
    // The lease itself was ended (DELETE /leases/:id), after which a kill would have booted a new container.
    expect(made.filter((line) => line.startsWith(`DELETE ${PREFIX}/leases/`))).toHaveLength(1);
    expect(await emu.leftovers()).toEqual([]);
  }, 60_000);

  it("release lets a command in flight finish, then closes the channel: its terminal ends, no multiplexer is left", async () => {
    const host = harness({ reuseLease: true, keepAlive: true });
    const lease = await host.acquire();
    try {
      await host.sh(lease, "true");
      await ready(lease);
      const terminals = () => emu.requests.list({ includeRunning: true }).filter((r) => (r.route ?? r.path) === `${PREFIX}/terminal` && !r.done);
      expect(terminals()).toHaveLength(1);
      const late = host.sh(lease, "sleep 1; echo drained");
      await new Promise((resolve) => setTimeout(resolve, 200));
      await host.release(lease);
      expect((await late).stdout).toBe("drained\n");
      expect(commandChannelStatus(id(lease)).state).toBe("none");
      await vi.waitFor(() => expect(terminals()).toEqual([]), { timeout: 10_000, interval: 50 });
      expect(await bridgeSh(id(lease), "ps -eo args | grep -c '^paperclip-chan[n]el' || true")).toMatch(/^0\n?$/);
    } finally {
      await host.destroy(lease);
    }
    expect(await emu.leftovers()).toEqual([]);
  }, 60_000);
});
