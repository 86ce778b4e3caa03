// The e2b provider's lease lifecycle against the envd emulator with the real SDK, in process: reuse
// through pause/resume, the sandbox timeout kept alive and capped by requestedExpiresAt, reconnects
// that never shorten it, and a timed-out sandbox reported as an expired lease.
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it, vi } from "vitest";
import { Sandbox } from "e2b";
import { hostFor } from "@paperclip-sandbox/conformance";
import { createManualClock, runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { createE2bPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
// Sandbox timeouts on a clock the test moves: a sandbox times out when the test says so, never while
// it is being acquired (a real 1 s timeout ran out during a loaded CI's acquire).
const clock = createManualClock();
const fast = await runEmulator(emulator, { options: { clock } });
afterAll(async () => {
  await emu.close();
  await fast.close();
});
const sdkOf = (e: typeof emu) => ({ apiKey: e.credentials.apiKey!, apiUrl: e.url, sandboxUrl: e.url });
const sdk = sdkOf(emu);

const infoOn = (opts: typeof sdk) => (id: string) => Sandbox.getInfo(id, opts).catch((error: Error) => (error.name === "SandboxNotFoundError" ? null : Promise.reject(error)));
const info = infoOn(sdk);
const endOf = async (id: string) => (await info(id))!.endAt.getTime();

describe("e2b lease lifecycle (envd emulator)", () => {
  it("reuse through pause and resume keeps a running process and a file", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 60_000 }, { driverKey: "e2b" });
    const first = createE2bPlugin().plugin;
    const lease = await h.withPlugin(first).acquire();
    expect(lease.metadata?.reusable).toBe(true);
    // The counter is replaced by a rename, so a read never meets it truncated mid-write.
    const started = await h
      .withPlugin(first)
      .sh(
        lease,
        "echo kept > file.txt; nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; sleep 0.05; done' >/dev/null 2>&1 & echo $! > counter.pid; sleep 0.3; cat counter",
      );
    expect(started.exitCode).toBe(0);
    const before = Number(started.stdout.trim());
    expect(before).toBeGreaterThan(0);

    expect(await h.withPlugin(first).release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect((await info(lease.providerLeaseId!))?.state).toBe("paused");
    await sleep(3_000); // frozen: the counter must not move

    // The next run, in another worker: resumed under the same id, the same process still counting.
    const second = createE2bPlugin().plugin;
    const resumed = await h.withPlugin(second).resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    const after = await h.withPlugin(second).sh(resumed, 'cat file.txt; kill -0 "$(cat counter.pid)" && echo alive; cat counter');
    expect(after.exitCode).toBe(0);
    const [file, alive, counter] = after.stdout.trim().split("\n");
    expect(file).toBe("kept");
    expect(alive).toBe("alive");
    // Same process, continuing where it stopped: a restart would begin again at 1, a running one
    // during the 3 s pause would be ~60 further. The margin covers the counting between the read
    // above and the pause taking effect, which a busy machine stretches.
    expect(Number(counter)).toBeGreaterThanOrEqual(before);
    expect(Number(counter)).toBeLessThan(before + 40);
    expect(await h.withPlugin(second).destroy(resumed)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await info(lease.providerLeaseId!)).toBeNull();
  });

  it("without reuse the sandbox is killed at release with a destroyed receipt", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, timeoutMs: 60_000 }, { driverKey: "e2b" });
    const plugin = createE2bPlugin().plugin;
    const lease = await h.withPlugin(plugin).acquire();
    expect(lease.metadata?.reusable).toBe(false);
    expect(await h.withPlugin(plugin).release(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    expect(await info(lease.providerLeaseId!)).toBeNull();
  });

  it("a held lease keeps its sandbox past the sandbox timeout, one refresh per third of it", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, timeoutMs: 2_000 }, { driverKey: "e2b" });
    const plugin = createE2bPlugin().plugin;
    const lease = await h.withPlugin(plugin).acquire();
    const mark = emu.requests.mark();
    const started = performance.now();
    await sleep(4_500);
    const result = await h.withPlugin(plugin).sh(lease, "echo alive");
    expect(result.stdout).toBe("alive\n");
    // Not `requests.idle()`: the lease's command channel is a call that runs as long as it lives.
    await vi.waitFor(() => expect(emu.requests.list({ since: mark, route: "/sandboxes/:id/timeout", includeRunning: true }).every((r) => r.done)).toBe(true));
    const refreshes = emu.requests.count({ since: mark, route: "/sandboxes/:id/timeout" });
    // Alive after 4.5 s on a 2 s timeout: it was refreshed at least twice. A busy machine only
    // delays the 666 ms timer, so there is never more than one refresh per interval elapsed.
    expect(refreshes).toBeGreaterThanOrEqual(2);
    expect(refreshes).toBeLessThanOrEqual(Math.floor((performance.now() - started) / 666) + 1);
    await h.withPlugin(plugin).destroy(lease);
  });

  it("requestedExpiresAt caps the sandbox timeout: the refreshes never pass it and the sandbox ends there", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, timeoutMs: 3_000 }, { driverKey: "e2b" });
    const plugin = createE2bPlugin().plugin;
    const requested = Date.now() + 5_500;
    const lease = await h.withPlugin(plugin).acquire({ requestedExpiresAt: new Date(requested).toISOString() });
    expect(Date.parse(lease.expiresAt!)).toBeLessThanOrEqual(requested);
    let lastEnd = 0;
    let gone = 0;
    while (Date.now() < requested + 15_000) {
      const seen = await info(lease.providerLeaseId!);
      if (!seen) {
        gone = Date.now();
        break;
      }
      lastEnd = seen.endAt.getTime();
      expect(lastEnd).toBeLessThanOrEqual(requested);
      await sleep(200);
    }
    // Kept alive past its 3 s timeout, to within a margin of the cap, then ended there (the
    // emulator kills at endAt; the provider keeps one second for the request's latency).
    expect(lastEnd).toBeGreaterThan(requested - 2_500);
    // It ends at the cap (endAt never passed it, checked above); when the emulator's timer gets to
    // run on a busy machine is not the provider's behaviour, so no upper bound on `gone`.
    expect(gone).toBeGreaterThan(0);
    expect(await h.withPlugin(plugin).destroy(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  });

  it("a reconnect does not shorten the sandbox timeout (the SDK's connect would reset a resumed one to 300 s)", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 900_000 }, { driverKey: "e2b" });
    const lease = await h.withPlugin(createE2bPlugin().plugin).acquire();
    const id = lease.providerLeaseId!;
    const created = await endOf(id);
    expect(created).toBeGreaterThan(Date.now() + 880_000);

    // A fresh worker adopts the running lease: connect may only extend.
    const adopter = createE2bPlugin().plugin;
    expect((await h.withPlugin(adopter).sh(lease, "true")).exitCode).toBe(0);
    expect(await endOf(id)).toBeGreaterThanOrEqual(created);

    // Paused at release, resumed by another worker: the lease's own timeout again, not 300 s.
    expect(await h.withPlugin(adopter).release(lease)).toMatchObject({ state: "stopped" });
    const resumed = await h.withPlugin(createE2bPlugin().plugin).resume(lease);
    expect(resumed.providerLeaseId).toBe(id);
    expect(await endOf(id)).toBeGreaterThan(Date.now() + 880_000);
    await h.withPlugin(createE2bPlugin().plugin).destroy(resumed);
  });

  it("a reconnect never extends a sandbox past requestedExpiresAt", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 3_600_000 }, { driverKey: "e2b" });
    // Closer than the 300 s a timeout-less connect would give a resumed sandbox.
    const requested = Date.now() + 120_000;
    const lease = await h.withPlugin(createE2bPlugin().plugin).acquire({ requestedExpiresAt: new Date(requested).toISOString() });
    expect(await endOf(lease.providerLeaseId!)).toBeLessThanOrEqual(requested);
    await h.withPlugin(createE2bPlugin().plugin).release(lease);
    const resumed = await h.withPlugin(createE2bPlugin().plugin).resume(lease);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(await endOf(lease.providerLeaseId!)).toBeLessThanOrEqual(requested);
    await h.withPlugin(createE2bPlugin().plugin).destroy(resumed);
  });

  it("a resume after the sandbox timed out (its worker gone) reports the expired lease", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdkOf(fast), reuseLease: true, timeoutMs: 10_000 }, { driverKey: "e2b" });
    const crashed = createE2bPlugin().plugin;
    await clock.advanceTo(Date.now());
    const lease = await h.withPlugin(crashed).acquire();
    // The worker stops (no release): nothing refreshes the sandbox's timeout any more.
    await h.withPlugin(crashed).shutdown();
    const read = infoOn(sdkOf(fast));
    expect(await read(lease.providerLeaseId!)).not.toBeNull();
    await clock.advance(11_000);
    await vi.waitFor(async () => expect(await read(lease.providerLeaseId!)).toBeNull(), { timeout: 10_000, interval: 100 });
    expect(await h.withPlugin(createE2bPlugin().plugin).resume(lease)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
  });

  it("a paused lease past its requestedExpiresAt resumes as expired, and its sandbox is killed", async () => {
    const h = hostFor(createE2bPlugin().plugin, { ...sdk, reuseLease: true, timeoutMs: 60_000 }, { driverKey: "e2b" });
    // Far enough ahead that acquire and release finish before the capped sandbox timeout (cap less a
    // second, in whole seconds) on a loaded machine: at 2.5 s the sandbox had about 1 s to live, and
    // at 8 s an acquire and release at load 14 still outlived it (the sandbox was gone, not paused).
    const requested = Date.now() + 20_000;
    const plugin = createE2bPlugin().plugin;
    const lease = await h.withPlugin(plugin).acquire({ requestedExpiresAt: new Date(requested).toISOString() });
    expect(await h.withPlugin(plugin).release(lease)).toMatchObject({ state: "stopped" });
    expect((await info(lease.providerLeaseId!))?.state).toBe("paused");
    await sleep(requested - Date.now() + 100);
    expect(await h.withPlugin(createE2bPlugin().plugin).resume(lease)).toEqual({ providerLeaseId: null, metadata: { expired: true } });
    expect(await info(lease.providerLeaseId!)).toBeNull();
  });
});
