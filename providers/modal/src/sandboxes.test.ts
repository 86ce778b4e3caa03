// A resume's new sandbox may find its name still held by the one just ended: the create is tried
// again each second (on an injected clock) for up to 4 s (5 tries), then fails naming the name and Modal's
// last refusal; any other failure, and a create without a name, is not tried again.
import { describe, expect, it } from "vitest";
import { isPollTimeoutError } from "@paperclip-sandbox/kit";
import type { ModalAccount } from "./client.js";
import { modalConfigSchema } from "./config.js";
import { createSandbox } from "./sandboxes.js";

const taken = () => Object.assign(new Error("a running Sandbox named 'lease-1' already exists in this App"), { name: "AlreadyExistsError" });

/** An account whose creates answer `answers` in turn (an Error is thrown), the last one repeated. */
function account(...answers: Array<Error | "made">) {
  let creates = 0;
  const create = async () => {
    const answer = answers[Math.min(creates++, answers.length - 1)]!;
    if (answer instanceof Error) throw answer;
    return { sandboxId: "sb-1" };
  };
  const fake = { app: async () => ({}), call: (_operation: string, run: () => Promise<unknown>) => run(), client: { sandboxes: { create } } };
  let t = 0;
  const pauses: number[] = [];
  const clock = { now: () => t, sleep: async (ms: number) => void (pauses.push(ms), (t += ms)) };
  return { account: fake as unknown as ModalAccount, creates: () => creates, pauses, clock };
}

const config = modalConfigSchema.parse({ tokenId: "ak-1", tokenSecret: "as-1" });
const create = (a: ReturnType<typeof account>, name?: string) => createSandbox(a.account, config, { image: {} as never, tags: {}, expiresAt: null, clock: a.clock, ...(name ? { name } : {}) });

describe("createSandbox under a name still held", () => {
  it("tries again each second until the name is free", async () => {
    const a = account(taken(), taken(), "made");
    await expect(create(a, "lease-1")).resolves.toMatchObject({ sandbox: { sandboxId: "sb-1" } });
    expect(a.creates()).toBe(3);
    expect(a.pauses).toEqual([1_000, 1_000]);
  });

  it("gives up after 4 s (5 tries), naming the sandbox name and Modal's refusal", async () => {
    const a = account(taken());
    const error = await create(a, "lease-1").catch((e: unknown) => e);
    expect(isPollTimeoutError(error)).toBe(true);
    expect((error as Error).message).toBe("timed out after 4 s waiting for modal sandbox name lease-1 to be free (a running Sandbox named 'lease-1' already exists in this App)");
    expect(a.creates()).toBe(5);
  });

  it("does not try again after another failure, nor for a create without a name", async () => {
    const quota = account(new Error("quota"));
    await expect(create(quota, "lease-1")).rejects.toThrow("quota");
    expect(quota.creates()).toBe(1);
    const unnamed = account(taken());
    await expect(create(unnamed)).rejects.toThrow("already exists");
    expect(unnamed.creates()).toBe(1);
  });
});
