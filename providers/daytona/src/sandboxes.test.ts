// Starting a sandbox that is in a transition: the state is read again (on an injected clock) until it
// settles, then the one call that brings it to `started` is made; a transition that outlasts the
// state timeout ends with an error naming the sandbox and the state it was left in.
import { describe, expect, it } from "vitest";
import { isPollTimeoutError } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import { startSandbox } from "./sandboxes.js";

/** A sandbox whose refreshes read `states` in turn (then the last), and a client that records each call. */
function fake(...states: string[]) {
  const calls: string[] = [];
  let read = 0;
  const sandbox = {
    id: "sb-1",
    state: "unknown",
    refreshData: async () => void (sandbox.state = states[Math.min(read++, states.length - 1)]!),
    start: async () => void (sandbox.state = "started"),
    waitUntilStarted: async () => void (sandbox.state = "started"),
  };
  const client = { call: (operation: string, run: () => Promise<unknown>) => (calls.push(operation), run()) } as unknown as DaytonaClient;
  let t = 0;
  const pauses: number[] = [];
  const clock = { now: () => t, sleep: async (ms: number) => void (pauses.push(ms), (t += ms)) };
  return { sandbox: sandbox as never, client, calls, pauses, clock };
}

describe("startSandbox", () => {
  it("waits out a stop, then starts the sandbox with one call", async () => {
    const f = fake("stopping", "stopping", "stopping", "stopped");
    await startSandbox(f.client, f.sandbox, f.clock);
    expect(f.calls).toEqual(["getSandbox", "getSandbox", "getSandbox", "getSandbox", "startSandbox"]);
    expect(f.pauses).toEqual([250, 500, 1_000]);
  });

  it("hands a sandbox that is already starting to the SDK's wait, and leaves a started one alone", async () => {
    const starting = fake("archiving", "restoring");
    await startSandbox(starting.client, starting.sandbox, starting.clock);
    expect(starting.calls).toEqual(["getSandbox", "getSandbox", "waitUntilStarted"]);
    const started = fake("started");
    await startSandbox(started.client, started.sandbox, started.clock);
    expect(started.calls).toEqual(["getSandbox"]);
  });

  it("gives up after the state timeout, naming the sandbox and where it stood", async () => {
    const f = fake("archiving");
    const error = await startSandbox(f.client, f.sandbox, f.clock).catch((e: unknown) => e);
    expect(isPollTimeoutError(error)).toBe(true);
    expect((error as Error).message).toBe("timed out after 120 s waiting for daytona sandbox sb-1 to settle before it is started (it is archiving)");
    expect(f.pauses.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(120_000);
    expect(f.calls).not.toContain("startSandbox");
  });

  it("refuses a sandbox in a state that no wait or start fixes", async () => {
    const f = fake("error");
    await expect(startSandbox(f.client, f.sandbox, f.clock)).rejects.toThrow("daytona sandbox sb-1 cannot be started: it is error");
    expect(f.pauses).toEqual([]);
  });
});
