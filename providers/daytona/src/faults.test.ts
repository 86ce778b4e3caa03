// Transient errors, lost answers and dropped streams, injected at the emulator: what is retried
// (once), what is not, and that nothing is left behind or run twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, waitFor, type Harness } from "./__fixtures__/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close(), 60_000);

const EXECUTE = "/toolbox/:sandboxId/process/execute";
const sandboxesOfRun = async (runLabel: string) => {
  const found: string[] = [];
  for await (const sandbox of h.sdk.list({ labels: { "paperclip-run": runLabel } })) found.push(sandbox.id);
  return found;
};

describe("transient errors", () => {
  it("retries a 5xx on an idempotent call once, and gives up after the second attempt", async () => {
    const lease = await h.acquire();
    h.emu.faults.inject({ kind: "status", status: 503, route: "/api/sandbox/:sandboxIdOrName", method: "DELETE", times: 2 });
    let mark = h.emu.requests.mark();
    await expect(h.destroy(lease)).rejects.toThrow(/^daytona deleteSandbox failed: HTTP 503 .* \(after 2 attempts\)$/);
    expect(await h.calls(mark)).toEqual(["DELETE /api/sandbox/:sandboxIdOrName 503", "DELETE /api/sandbox/:sandboxIdOrName 503"]);
    h.emu.faults.inject({ kind: "status", status: 502, route: "/api/sandbox/:sandboxIdOrName", method: "DELETE", times: 1 });
    mark = h.emu.requests.mark();
    expect(await h.destroy(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    // The failed destroy let go of the lease: this one looks it up again first.
    expect(await h.calls(mark)).toEqual(["GET /api/sandbox/:sandboxIdOrName 200", "DELETE /api/sandbox/:sandboxIdOrName 502", "DELETE /api/sandbox/:sandboxIdOrName 200"]);
  });

  it("sends a command again only when the toolbox answered 429/502/503 (it never ran); a 500 is not repeated", async () => {
    const lease = await h.acquire();
    h.emu.faults.inject({ kind: "rate-limit", route: EXECUTE, times: 1, retryAfterSeconds: 1 });
    const started = Date.now();
    expect((await h.sh(lease, "echo once >> ran.txt; wc -l < ran.txt")).stdout).toBe("1\n");
    expect(Date.now() - started).toBeGreaterThanOrEqual(900); // Retry-After honoured
    h.emu.faults.inject({ kind: "status", status: 503, route: EXECUTE, times: 1 });
    expect((await h.sh(lease, "echo once >> ran.txt; wc -l < ran.txt")).stdout).toBe("2\n");
    h.emu.faults.inject({ kind: "status", status: 500, route: EXECUTE, times: 1 });
    const mark = h.emu.requests.mark();
    await expect(h.sh(lease, "echo once >> ran.txt")).rejects.toThrow(/daytona executeCommand failed: HTTP 500/);
    expect(await h.calls(mark)).toEqual([`POST ${EXECUTE} 500`]);
    await h.destroy(lease);
  });

  it("retries a create refused with 429 or 503 without making two sandboxes", async () => {
    for (const fault of [
      { kind: "rate-limit" as const, retryAfterSeconds: 1 },
      { kind: "status" as const, status: 503 },
    ]) {
      h.emu.faults.inject({ ...fault, route: "/api/sandbox", method: "POST", times: 1 });
      const lease = await h.acquire();
      const labels = (await h.sdk.get(lease.providerLeaseId!)).labels;
      expect(await sandboxesOfRun(labels["paperclip-run"]!)).toEqual([lease.providerLeaseId]);
      await h.destroy(lease);
    }
  });
});

describe("a create whose answer is lost", () => {
  it("finds the sandbox by its create label and uses it: one sandbox, no second create", async () => {
    h.emu.faults.inject({ kind: "reset", route: "/api/sandbox", method: "POST", times: 1, afterBytes: 20 });
    const mark = h.emu.requests.mark();
    const lease = await h.acquire();
    const calls = await h.calls(mark);
    expect(calls.filter((call) => call.startsWith("POST /api/sandbox "))).toHaveLength(1);
    expect(calls).toContain("GET /api/sandbox 200");
    const labels = (await h.sdk.get(lease.providerLeaseId!)).labels;
    expect(await sandboxesOfRun(labels["paperclip-run"]!)).toEqual([lease.providerLeaseId]);
    expect((await h.sh(lease, "echo fine")).stdout).toBe("fine\n");
    await h.destroy(lease);
  });

  it("when it cannot be looked for, acquire fails and the lifecycle layer finds it by the run's label and deletes it", async () => {
    h.emu.faults.inject({ kind: "reset", route: "/api/sandbox", method: "POST", times: 1 });
    h.emu.faults.inject({ kind: "status", status: 503, route: "/api/sandbox", method: "GET", times: 2 }); // both attempts of the look-up
    const before = (await h.emu.leftovers()).length;
    await expect(h.acquire()).rejects.toThrow(/daytona createSandbox failed: no response \(connection_reset\)/);
    await waitFor("the clean-up", async () => (await h.emu.leftovers()).length === before);
    expect(await h.emu.leftovers()).toEqual([]);
  });
});

describe("a dropped log stream (live output)", () => {
  it("completes the output from the command's logs and keeps its exit code", async () => {
    const live = { liveOutput: true };
    const lease = await h.acquire(live);
    h.emu.faults.inject({ kind: "drop-stream", route: "/toolbox/:sandboxId/process/session/:sessionId/command/:commandId/logs", afterMessages: 1, times: 1 });
    const mark = h.emu.requests.mark();
    const result = await h.sh(lease, "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; exit 6", { config: live });
    expect(result).toMatchObject({ exitCode: 6, stdout: "one\nthree\n", stderr: "two\n" });
    const calls = await h.calls(mark);
    expect(calls).toContain("GET /toolbox/:sandboxId/process/session/:sessionId/command/:commandId 200");
    expect(calls).toContain("GET /toolbox/:sandboxId/process/session/:sessionId/command/:commandId/logs 200");
    await h.destroy(lease, live);
  });
});

describe("errors that name their cause", () => {
  it("a rejected key says so, without the key; the DAYTONA_API_KEY fallback is used when the config has none", async () => {
    const wrong = "dtn_wrong_key_0123456789abcdef";
    const error = (await h.acquire({ apiKey: wrong }).catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/Daytona rejected the API key \(HTTP 401: Unauthorized\); check the API key field or DAYTONA_API_KEY/);
    expect(error.message).not.toContain(wrong);
    const fallback = await startHarness({ apiKey: "dtn_from_the_worker_env_123456" }, { env: { DAYTONA_API_KEY: "dtn_from_the_worker_env_123456" } });
    try {
      const lease = await fallback.acquire({ apiKey: undefined });
      expect((await fallback.sh(lease, "echo ok", { config: { apiKey: undefined } })).stdout).toBe("ok\n");
      await fallback.destroy(lease, { apiKey: undefined });
      const none = await startHarness({}, { env: {} });
      await expect(none.acquire({ apiKey: undefined })).rejects.toThrow(/^Daytona API key is not set/);
      await none.close();
    } finally {
      await fallback.close();
    }
  });

  it("a quota refusal says what to do, and the failed acquire leaves nothing", async () => {
    const small = await startHarness({ quota: { cpu: 1 } });
    try {
      const first = await small.acquire();
      await expect(small.acquire()).rejects.toThrow(
        /^daytona createSandbox failed: HTTP 400 quota_exceeded: Daytona quota exceeded: Total CPU limit exceeded\. Maximum allowed: 1\. Stop or delete sandboxes/,
      );
      expect(await small.emu.leftovers()).toHaveLength(2); // the first lease's record and jail
      await small.destroy(first);
      expect(await small.emu.leftovers()).toEqual([]);
    } finally {
      await small.close();
    }
  });
});
