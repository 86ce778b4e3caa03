import { describe, expect, it } from "vitest";
import { createTokenCache } from "./tokens.js";

const KEY = `bxd_${"k".repeat(40)}`;
const URL_A = new URL("https://app.boxd.sh/api/v1/auth/token");

/** A fake exchange: counts calls, answers a token valid for `ttlS` from the fake clock. */
function exchange(clock: { now: number }, ttlS = 3600, answer?: (n: number) => Response | undefined) {
  const calls: Array<{ url: string; body: unknown }> = [];
  const fetch = (async (url: string | URL, init?: RequestInit) => {
    calls.push({ url: String(url), body: JSON.parse(String(init?.body)) });
    const special = answer?.(calls.length);
    if (special) return special;
    return new Response(JSON.stringify({ token: `jwt-${calls.length}`, expires_at: Math.floor(clock.now / 1000) + ttlS, user_id: "octo" }), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  }) as typeof globalThis.fetch;
  return { fetch, calls };
}

describe("boxd token cache: one exchange per key, refreshed before expiry", () => {
  it("exchanges once for many calls and concurrent callers, posting {api_key}", async () => {
    const clock = { now: 1_000_000_000_000 };
    const fake = exchange(clock);
    const source = createTokenCache({ fetch: fake.fetch, now: () => clock.now }).forKey(KEY, URL_A);
    const tokens = await Promise.all([source.current(), source.current(), source.current()]);
    for (let i = 0; i < 20; i++) tokens.push(await source.current());
    expect(new Set(tokens.map((t) => t.token))).toEqual(new Set(["jwt-1"]));
    expect(fake.calls).toEqual([{ url: URL_A.href, body: { api_key: KEY } }]);
    expect(tokens[0]).toMatchObject({ userId: "octo" });
  });

  it("refreshes 30 s before the token expires, not after", async () => {
    const clock = { now: 1_000_000_000_000 };
    const fake = exchange(clock);
    const source = createTokenCache({ fetch: fake.fetch, now: () => clock.now }).forKey(KEY, URL_A);
    expect((await source.current()).token).toBe("jwt-1");
    clock.now += 3600_000 - 31_000;
    expect((await source.current()).token).toBe("jwt-1");
    clock.now += 2_000; // 29 s left
    expect((await source.current()).token).toBe("jwt-2");
    expect(fake.calls).toHaveLength(2);
  });

  it("keeps one token per key and per exchange URL", async () => {
    const clock = { now: 1_000_000_000_000 };
    const fake = exchange(clock);
    const cache = createTokenCache({ fetch: fake.fetch, now: () => clock.now });
    await cache.forKey(KEY, URL_A).current();
    await cache.forKey(KEY, URL_A).current();
    await cache.forKey(`bxd_${"z".repeat(40)}`, URL_A).current();
    await cache.forKey(KEY, new URL("http://127.0.0.1:9/api/v1/auth/token")).current();
    expect(fake.calls).toHaveLength(3);
    expect(cache.exchanges).toBe(3);
  });

  it("a refused token is exchanged again on the next call", async () => {
    const clock = { now: 1_000_000_000_000 };
    const fake = exchange(clock);
    const source = createTokenCache({ fetch: fake.fetch, now: () => clock.now }).forKey(KEY, URL_A);
    const first = await source.current();
    source.invalidate(first.token);
    expect((await source.current()).token).toBe("jwt-2");
  });

  it("a bad key is an error naming the status, without the key; the next call tries again", async () => {
    const clock = { now: 1_000_000_000_000 };
    const fake = exchange(clock, 3600, (n) => (n === 1 ? new Response(JSON.stringify({ error: `invalid API key ${KEY}` }), { status: 401 }) : undefined));
    const source = createTokenCache({ fetch: fake.fetch, now: () => clock.now }).forKey(KEY, URL_A);
    const error = await source.current().catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/^boxd exchangeApiKey failed: HTTP 401/);
    expect((error as Error).message).not.toContain(KEY);
    expect((await source.current()).token).toBe("jwt-2");
  });

  it("refuses an answer without a token or with one already expired", async () => {
    const clock = { now: 1_000_000_000_000 };
    const noToken = exchange(clock, 3600, () => new Response(JSON.stringify({ expires_at: 5 }), { status: 200 }));
    await expect(
      createTokenCache({ fetch: noToken.fetch, now: () => clock.now })
        .forKey(KEY, URL_A)
        .current(),
    ).rejects.toThrow(/without token and expires_at/);
    const stale = exchange(clock, -10);
    await expect(
      createTokenCache({ fetch: stale.fetch, now: () => clock.now })
        .forKey(KEY, URL_A)
        .current(),
    ).rejects.toThrow(/already expired/);
  });
});
