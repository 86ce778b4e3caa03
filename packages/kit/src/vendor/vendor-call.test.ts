import { describe, expect, it } from "vitest";
import { afterEach } from "vitest";
import { json, startLoopback } from "./__fixtures__/loopback.js";
import { createClientCache, createVendorCall, createVendorClient, memoAsync, memoAsyncByKey, ProviderApiError } from "./index.js";

const failed = (status: number, extra: Partial<ConstructorParameters<typeof ProviderApiError>[0]> = {}) =>
  new ProviderApiError({
    vendor: "v",
    operation: "op",
    status,
    code: `http_${status}`,
    detail: "",
    retryable: status >= 500 || status === 429,
    gone: status === 404,
    mayHaveTakenEffect: status !== 429,
    ...extra,
  });

describe("createVendorCall: call the SDK, translate the error, retry", () => {
  const noWait = { random: () => 0, sleep: async () => undefined };

  it("retries an idempotent call after a translated transient failure, with the per-call budget winning", async () => {
    const seen: string[] = [];
    const call = createVendorCall<{ note?: string }>({
      translate: (error, operation, context) => (seen.push(`${operation}:${context.note ?? ""}`), failed(Number((error as Error).message))),
      retry: { attempts: 5 },
      ...noWait,
    });
    let attempts = 0;
    const result = await call(
      "getThing",
      async () => {
        attempts += 1;
        if (attempts < 3) throw new Error("503");
        return "ok";
      },
      { idempotent: true, note: "ctx" },
    );
    expect([result, attempts, seen]).toEqual(["ok", 3, ["getThing:ctx", "getThing:ctx"]]);
    let limited = 0;
    await expect(call("getThing", async () => ((limited += 1), Promise.reject(new Error("503"))), { idempotent: true, attempts: 2 })).rejects.toMatchObject({ status: 503, attempts: 2 });
    expect(limited).toBe(2);
  });

  it("never repeats a non-idempotent call that may have taken effect, but does one refused before it ran", async () => {
    const call = createVendorCall({ translate: (error) => error, ...noWait });
    let creates = 0;
    await expect(call("create", async () => ((creates += 1), Promise.reject(failed(503))), { idempotent: false })).rejects.toMatchObject({ status: 503 });
    expect(creates).toBe(1);
    let refused = 0;
    await call(
      "create",
      async () => {
        refused += 1;
        if (refused === 1) throw failed(429);
      },
      { idempotent: false },
    );
    expect(refused).toBe(2);
  });

  it("throws a failure its translator could not type at once (a bug is not retried)", async () => {
    const call = createVendorCall({ translate: () => new TypeError("not a vendor error"), ...noWait });
    let calls = 0;
    await expect(call("op", async () => ((calls += 1), Promise.reject(new Error("x"))), { idempotent: true })).rejects.toThrow(TypeError);
    expect(calls).toBe(1);
  });
});

describe("createClientCache and memoAsync", () => {
  it("one client per credential (keys hashed), a rejected one forgotten", async () => {
    let made = 0;
    let refusals = 2;
    const cache = createClientCache(
      (config: { key: string }) => [config.key],
      async (config) => {
        made += 1;
        if (config.key === "bad" && refusals-- > 0) throw new Error("login refused");
        return { key: config.key };
      },
    );
    expect(cache.get({ key: "a" })).toBe(cache.get({ key: "a" }));
    await expect(cache.get({ key: "bad" })).rejects.toThrow("login refused");
    await expect(cache.get({ key: "bad" })).rejects.toThrow("login refused");
    await expect(cache.get({ key: "bad" })).resolves.toEqual({ key: "bad" });
    expect(made).toBe(4);
    expect(cache.values()).toHaveLength(2);
  });

  it("memoAsync shares one pending promise, forgets a rejection, and forget() starts over", async () => {
    let made = 0;
    const session = memoAsync(async () => {
      made += 1;
      if (made === 1) throw new Error("daemon restarting");
      return `s${made}`;
    });
    await expect(session()).rejects.toThrow("daemon restarting");
    const [a, b] = await Promise.all([session(), session()]);
    expect([a, b, made]).toEqual(["s2", "s2", 2]);
    session.forget();
    expect(await session()).toBe("s3");
    const byKey = memoAsyncByKey<number>();
    expect(await byKey.get("k", async () => 1)).toBe(1);
    expect(await byKey.get("k", async () => 2)).toBe(1);
    await expect(byKey.get("x", async () => Promise.reject(new Error("no")))).rejects.toThrow("no");
    expect(await byKey.get("x", async () => 3)).toBe(3);
  });
});

describe("createVendorClient: server-sent events", () => {
  const servers: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it("reads a text/event-stream answer event by event (split chunks, CRLF, comments, multi-line data, ids)", async () => {
    const server = await startLoopback((req, res) => {
      if (req.headers.accept !== "text/event-stream") return json(res, 406, { message: "accept" });
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": keepalive\r\n\r\nevent: stdout\r\ndata: hel");
      res.write("lo\r\ndata: world\r\nid: 7\r\n\r\n");
      res.write('data: {"exitCode":0}\n\n');
      res.end("data: no blank line at the end is not an event");
    });
    servers.push(server);
    const client = createVendorClient({ vendor: "v", baseUrl: server.url, headers: { authorization: "Bearer t0k3n-abcdef12" } });
    const events = [];
    for await (const event of await client.events({ operation: "exec", method: "POST", path: "/exec", json: { streamOutput: true }, idempotent: false })) events.push(event);
    expect(events).toEqual([
      { event: "stdout", data: "hello\nworld", id: "7" },
      { event: "message", data: '{"exitCode":0}', id: "7" },
    ]);
  });

  it("an error answer to an event-stream request is the usual typed error", async () => {
    const server = await startLoopback((_req, res) => json(res, 401, { error: "unauthorized", message: "Missing or invalid bridge bearer token." }));
    servers.push(server);
    const client = createVendorClient({ vendor: "cloudflare", baseUrl: server.url });
    await expect(client.events({ operation: "exec", path: "/exec", idempotent: false })).rejects.toMatchObject({ status: 401, code: "unauthorized" });
  });
});
