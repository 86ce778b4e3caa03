import { describe, expect, it } from "vitest";
import { ProviderApiError } from "./api-error.js";
import { createIdempotently } from "./idempotent-create.js";

const failure = (status: number, fields: Partial<ConstructorParameters<typeof ProviderApiError>[0]> = {}) =>
  new ProviderApiError({ vendor: "v", operation: "create", status, code: `http_${status}`, detail: "", retryable: true, gone: false, mayHaveTakenEffect: true, ...fields });

/** A vendor whose creates fail as scripted; `made` holds every resource that really came to exist. */
function vendor(outcomes: Array<"ok" | "lost" | ProviderApiError>, findFails = false) {
  const made: string[] = [];
  const calls = { create: 0, find: 0 };
  return {
    made,
    calls,
    options: {
      create: async (nonce: string) => {
        const outcome = outcomes[calls.create++] ?? "ok";
        if (outcome === "ok" || outcome === "lost") made.push(nonce);
        if (outcome === "lost") throw failure(0, { code: "connection_reset" });
        if (outcome !== "ok") throw outcome;
        return nonce;
      },
      find: async (nonce: string) => {
        calls.find += 1;
        if (findFails) throw failure(503);
        return made.includes(nonce) ? nonce : undefined;
      },
      sleep: async () => undefined,
    },
  };
}

describe("createIdempotently", () => {
  it("creates once when the vendor answers", async () => {
    const v = vendor(["ok"]);
    await expect(createIdempotently(v.options)).resolves.toBe(v.made[0]);
    expect(v.calls).toEqual({ create: 1, find: 0 });
  });

  it("uses the resource a lost answer made instead of making a second one", async () => {
    const v = vendor(["lost"]);
    expect(await createIdempotently(v.options)).toBe(v.made[0]);
    expect(v.made).toHaveLength(1);
    expect(v.calls).toEqual({ create: 1, find: 1 });
  });

  it("looks first and creates again after a 503 that made nothing; a 429 is retried without looking", async () => {
    const after503 = vendor([failure(503)]);
    await createIdempotently(after503.options);
    expect(after503.calls).toEqual({ create: 2, find: 1 });
    const after429 = vendor([failure(429, { mayHaveTakenEffect: false })]);
    await createIdempotently(after429.options);
    expect(after429.calls).toEqual({ create: 2, find: 0 });
    expect([after503.made.length, after429.made.length]).toEqual([1, 1]);
  });

  it("throws the first error when the look-up fails, without a second create", async () => {
    const v = vendor(["lost"], true);
    await expect(createIdempotently(v.options)).rejects.toMatchObject({ code: "connection_reset" });
    expect(v.calls).toEqual({ create: 1, find: 1 });
  });

  it("does not retry what is not retryable, or after the caller's abort; notes two attempts when both fail", async () => {
    const refused = vendor([failure(400, { retryable: false })]);
    await expect(createIdempotently(refused.options)).rejects.toMatchObject({ status: 400 });
    expect(refused.calls.create).toBe(1);
    const aborted = vendor([failure(503)]);
    const controller = new AbortController();
    controller.abort();
    await expect(createIdempotently({ ...aborted.options, signal: controller.signal })).rejects.toMatchObject({ status: 503 });
    expect(aborted.calls.create).toBe(1);
    const twice = vendor([failure(503), failure(502)]);
    await expect(createIdempotently(twice.options)).rejects.toMatchObject({ status: 502, attempts: 2 });
  });

  it("translates thrown values with toError before judging them", async () => {
    let calls = 0;
    const result = await createIdempotently({
      create: async () => {
        calls += 1;
        if (calls === 1) throw new Error("sdk: rate limited");
        return "made";
      },
      find: async () => undefined,
      toError: () => failure(429, { mayHaveTakenEffect: false }),
      sleep: async () => undefined,
    });
    expect([result, calls]).toEqual(["made", 2]);
  });
});
