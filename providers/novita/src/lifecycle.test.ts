// The novita provider's lease lifecycle against the envd emulator with the real novita-sandbox SDK,
// in process; and Novita's empty-body errors (which the SDK takes for success) through a proxy.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { Sandbox } from "novita-sandbox";
import { hostFor } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, SANDBOX_HOME } from "@paperclip-sandbox/emulator-envd";
import { createNovitaPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
// Sandbox timeouts ten times faster: Novita's shortest (10 s) lasts one real second.
const fast = await runEmulator(emulator, { options: { timeScale: 10 } });
afterAll(async () => {
  await emu.close();
  await fast.close();
});

const requestedCwd = `${SANDBOX_HOME}/paperclip-workspace`;
const sdkOf = (e: typeof emu, url = e.url) => ({ apiKey: e.credentials.apiKey!, apiUrl: url, sandboxUrl: url });
const sdk = sdkOf(emu);

const infoOn = (opts: typeof sdk) => (id: string) => Sandbox.getInfo(id, opts).catch((error: Error) => (error.name === "SandboxNotFoundError" ? null : Promise.reject(error)));
const info = infoOn(sdk);
const endOf = async (id: string) => (await info(id))!.endAt.getTime();

async function goneBy(read: (id: string) => Promise<unknown>, id: string, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if ((await read(id)) === null) return;
    await sleep(100);
  }
  throw new Error(`sandbox ${id} still exists after ${withinMs} ms`);
}

/**
 * A proxy in front of the emulator that answers chosen calls with an error status and NO body
 * (Content-Length: 0), the answer Novita's SDK reads as success.
 */
async function emptyBodyProxy(target: string) {
  const armed: Array<{ method: string; path: RegExp; status: number }> = [];
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const rule = armed.find((r) => r.method === req.method && r.path.test(req.url ?? ""));
    if (rule) {
      req.resume();
      res.writeHead(rule.status, { "content-length": "0" });
      res.end();
      return;
    }
    const forward = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arm: (method: string, path: RegExp, status: number) => armed.push({ method, path, status }),
    disarm: () => void armed.splice(0),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("novita lease lifecycle (envd emulator)", () => {
  it("reuse through pause and resume keeps a running process and a file", async () => {
    const h = hostFor(createNovitaPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 60_000 }, { driverKey: "novita" });
    const first = createNovitaPlugin().plugin;
    const lease = await h.withPlugin(first).acquire();
    expect(lease.metadata?.remoteCwd).toBe(requestedCwd);
    const started = await h.withPlugin(first).sh(lease, "echo kept > file.txt; nohup sh -c 'while :; do sleep 0.05; done' >/dev/null 2>&1 & echo $! > bg.pid");
    expect(started.exitCode).toBe(0);
    expect(await h.withPlugin(first).release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect((await info(lease.providerLeaseId!))?.state).toBe("paused");

    const second = createNovitaPlugin().plugin;
    const resumed = await h.withPlugin(second).resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    const after = await h.withPlugin(second).sh(resumed, 'cat file.txt && kill -0 "$(cat bg.pid)" && echo alive');
    expect(after.stdout).toBe("kept\nalive\n");
    expect(await h.withPlugin(second).destroy(resumed)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await info(lease.providerLeaseId!)).toBeNull();
  });

  it("requestedExpiresAt caps the sandbox timeout and the sandbox ends by then", async () => {
    const h = hostFor(createNovitaPlugin().plugin, { ...sdk, timeoutMs: 60_000 }, { driverKey: "novita" });
    const plugin = createNovitaPlugin().plugin;
    const requested = Date.now() + 4_000;
    const lease = await h.withPlugin(plugin).acquire({ requestedExpiresAt: new Date(requested).toISOString() });
    expect(Date.parse(lease.expiresAt!)).toBeLessThanOrEqual(requested);
    expect(await endOf(lease.providerLeaseId!)).toBeLessThanOrEqual(requested);
    // endAt is at or before the cap (above); when the emulator's timer then runs is the machine's
    // business, so the wait is generous.
    await goneBy(info, lease.providerLeaseId!, requested - Date.now() + 10_000);
    expect(await h.withPlugin(plugin).destroy(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  });

  it("a reconnect does not shorten the sandbox timeout (the SDK's connect would send its 300 s default)", async () => {
    const h = hostFor(createNovitaPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 900_000 }, { driverKey: "novita" });
    const lease = await h.withPlugin(createNovitaPlugin().plugin).acquire();
    const id = lease.providerLeaseId!;
    const created = await endOf(id);
    expect((await h.withPlugin(createNovitaPlugin().plugin).sh(lease, "true")).exitCode).toBe(0);
    expect(await endOf(id)).toBeGreaterThanOrEqual(created);
    await h.withPlugin(createNovitaPlugin().plugin).release(lease);
    const resumed = await h.withPlugin(createNovitaPlugin().plugin).resume(lease);
    expect(await endOf(id)).toBeGreaterThan(Date.now() + 880_000);
    await h.withPlugin(createNovitaPlugin().plugin).destroy(resumed);
  });

  it("a resume after the sandbox timed out (its worker gone) reports the expired lease", async () => {
    const h = hostFor(createNovitaPlugin().plugin, { ...sdkOf(fast), reuseLease: true, timeoutMs: 10_000 }, { driverKey: "novita" });
    const crashed = createNovitaPlugin().plugin;
    const lease = await h.withPlugin(crashed).acquire();
    await h.withPlugin(crashed).shutdown();
    await goneBy(infoOn(sdkOf(fast)), lease.providerLeaseId!, 5_000);
    expect(await h.withPlugin(createNovitaPlugin().plugin).resume(lease)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
  });

  it("with autoPause a timed-out sandbox is paused, and the next use resumes it with its processes", async () => {
    const h = hostFor(createNovitaPlugin().plugin, { ...sdkOf(fast), autoPause: true, timeoutMs: 10_000 }, { driverKey: "novita" });
    const crashed = createNovitaPlugin().plugin;
    const lease = await h.withPlugin(crashed).acquire();
    await h.withPlugin(crashed).sh(lease, "nohup sleep 600 >/dev/null 2>&1 & echo $! > bg.pid");
    await h.withPlugin(crashed).shutdown();
    const read = infoOn(sdkOf(fast));
    const deadline = Date.now() + 5_000;
    while ((await read(lease.providerLeaseId!))?.state !== "paused" && Date.now() < deadline) await sleep(100);
    expect((await read(lease.providerLeaseId!))?.state).toBe("paused");
    // The next execute finds it paused (envd answers 502), resumes it and runs the command.
    const next = createNovitaPlugin().plugin;
    const result = await h.withPlugin(next).sh(lease, 'kill -0 "$(cat bg.pid)" && echo alive');
    expect(result.stdout).toBe("alive\n");
    await h.withPlugin(next).destroy(lease);
  });
});

describe("novita errors with an empty body are failures", () => {
  it("the SDK reports a kill answered 500 with no body as success; the provider does not", async () => {
    const proxy = await emptyBodyProxy(emu.url);
    try {
      const viaProxy = { ...sdk, apiUrl: proxy.url, sandboxUrl: proxy.url };
      const h = hostFor(createNovitaPlugin().plugin, { ...viaProxy, timeoutMs: 60_000 }, { driverKey: "novita" });
      const plugin = createNovitaPlugin().plugin;
      const lease = await h.withPlugin(plugin).acquire();
      proxy.arm("DELETE", /^\/sandboxes\//, 500);
      // The hazard itself: the SDK's own kill says it killed the sandbox.
      expect(await Sandbox.kill(lease.providerLeaseId!, viaProxy)).toBe(true);
      await expect(h.withPlugin(plugin).destroy(lease)).rejects.toThrow(/HTTP 500 with no error body/);
      expect((await info(lease.providerLeaseId!))?.state).toBe("running");
      proxy.disarm();
      expect(await h.withPlugin(plugin).destroy(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
      expect(await info(lease.providerLeaseId!)).toBeNull();
    } finally {
      await proxy.close();
    }
  });

  it("a create answered 503 with no body fails the acquire (and leaves nothing)", async () => {
    const proxy = await emptyBodyProxy(emu.url);
    try {
      const viaProxy = { ...sdk, apiUrl: proxy.url, sandboxUrl: proxy.url };
      const before = (await emu.leftovers()).length;
      proxy.arm("POST", /^\/sandboxes$/, 503);
      await expect(hostFor(createNovitaPlugin().plugin, { ...viaProxy, timeoutMs: 60_000 }, { driverKey: "novita" }).acquire()).rejects.toThrow(/answered an error without a body/);
      expect((await emu.leftovers()).length).toBe(before);
    } finally {
      await proxy.close();
    }
  });

  it("a pause answered 500 with no body is not a pause: the release kills the sandbox instead", async () => {
    const proxy = await emptyBodyProxy(emu.url);
    try {
      const viaProxy = { ...sdk, apiUrl: proxy.url, sandboxUrl: proxy.url };
      const h = hostFor(createNovitaPlugin().plugin, { ...viaProxy, reuseLease: true, timeoutMs: 60_000 }, { driverKey: "novita" });
      const plugin = createNovitaPlugin().plugin;
      const lease = await h.withPlugin(plugin).acquire();
      proxy.arm("POST", /\/pause$/, 500);
      expect(await h.withPlugin(plugin).release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
      // Not left running: killed (the SDK alone would have reported it paused).
      expect(await info(lease.providerLeaseId!)).toBeNull();
    } finally {
      await proxy.close();
    }
  });
});
