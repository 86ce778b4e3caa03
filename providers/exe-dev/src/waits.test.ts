// The provider's waits run on the kit's pollUntil: here on an injected clock (no real time passes),
// their pauses, deadlines and what ends them at once.
import { describe, expect, it } from "vitest";
import { ProviderApiError, SshTransportError } from "@paperclip-sandbox/kit";
import { copyOwnVm, newOwnVm, waitUntilUnlisted, type VmRecord } from "./api.js";
import { connectWhenUp } from "./vm-ssh.js";

/** A clock that moves only when the wait sleeps, recording every pause. */
function fakeClock() {
  let now = 0;
  const pauses: number[] = [];
  return {
    pauses,
    now: () => now,
    sleep: async (ms: number) => {
      pauses.push(ms);
      now += ms;
    },
  };
}

const vm = (name: string): VmRecord => ({ name, sshDest: `${name}.exe.xyz`, tags: [] });

describe("connectWhenUp", () => {
  it("tries again every 250 ms while the VM's sshd refuses, and connects", async () => {
    const clock = fakeClock();
    let tries = 0;
    const session = {
      connect: async () => {
        tries += 1;
        if (tries < 4) throw new SshTransportError(tries % 2 ? "connect_failed" : "connection_lost", "refused");
      },
    };
    await connectWhenUp(session, new AbortController().signal, clock);
    expect([tries, clock.pauses]).toEqual([4, [250, 250, 250]]);
  });

  it("gives up at once on an authentication failure, and on a refusal once the create's signal has ended", async () => {
    const clock = fakeClock();
    const denied = new SshTransportError("auth_failed", "Permission denied");
    await expect(connectWhenUp({ connect: async () => Promise.reject(denied) }, new AbortController().signal, clock)).rejects.toBe(denied);
    const budget = new AbortController();
    const refused = new SshTransportError("connect_failed", "refused");
    await expect(
      connectWhenUp(
        {
          connect: async () => {
            budget.abort();
            throw refused;
          },
        },
        budget.signal,
        clock,
      ),
    ).rejects.toBe(refused);
    expect(clock.pauses).toEqual([]);
  });
});

describe("waitUntilUnlisted", () => {
  it("reads ls with growing pauses until the VM is gone", async () => {
    const clock = fakeClock();
    let reads = 0;
    await waitUntilUnlisted({ find: async () => (++reads < 6 ? vm("a-vm") : undefined) }, "a-vm", clock);
    expect([reads, clock.pauses]).toEqual([6, [100, 200, 400, 800, 1600]]);
  });

  it("fails after its deadline naming the VM, with no deletion confirmed", async () => {
    const clock = fakeClock();
    await expect(waitUntilUnlisted({ find: async () => vm("a-vm") }, "a-vm", { ...clock, totalMs: 10_000 })).rejects.toThrow(
      /^timed out after 10 s waiting for exe.dev to stop listing VM a-vm after rm \(its deletion is not confirmed\)$/,
    );
    expect(clock.now()).toBeLessThanOrEqual(10_000);
  });
});

describe("a launch whose name is taken by its own earlier attempt", () => {
  const refusal = (operation: string, detail: string) =>
    new ProviderApiError({ vendor: "exe.dev", operation, status: 422, code: "http_422", detail, retryable: false, gone: false, mayHaveTakenEffect: false });
  const taken = (name: string) => refusal("cp", `name ${JSON.stringify(name)} is not available`);

  it("waits for the earlier copy to be listed and uses it (cp), never a second one", async () => {
    const clock = fakeClock();
    let finds = 0;
    let copies = 0;
    const api = {
      copyVm: async () => {
        copies += 1;
        throw taken("pc-run-vx");
      },
      find: async () => (++finds < 3 ? undefined : vm("pc-run-vx")),
    };
    expect((await copyOwnVm(api, { source: "pc-tpl", name: "pc-run-vx" }, undefined, clock)).name).toBe("pc-run-vx");
    expect([copies, finds, clock.pauses]).toEqual([1, 3, [200, 400]]);
  });

  it("gives up with exe.dev's refusal when nothing is listed in time (new)", async () => {
    const clock = fakeClock();
    const refused = refusal("new", 'VM name "pc-run-vy" is not available');
    const api = { newVm: async () => Promise.reject(refused), find: async () => undefined };
    await expect(newOwnVm(api, { name: "pc-run-vy", tags: [], env: {} }, undefined, { ...clock, totalMs: 5_000 })).rejects.toBe(refused);
    expect(clock.now()).toBeLessThanOrEqual(5_000);
  });
});
