import { inspect } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { closedPort, json, startLoopback } from "./__fixtures__/loopback.js";
import { createVendorClient, isProviderApiError, ProviderApiError, vendorFetch, vendorFetchStream, withRetry } from "./index.js";

const TOKEN = "dtn_9f8e7d6c5b4a39281706f5e4d3c2b1a0";
const servers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function serve(handler: Parameters<typeof startLoopback>[0]) {
  const server = await startLoopback(handler);
  servers.push(server);
  return server;
}

async function failure(promise: Promise<unknown>): Promise<ProviderApiError> {
  try {
    await promise;
  } catch (error) {
    expect(isProviderApiError(error), String(error)).toBe(true);
    return error as ProviderApiError;
  }
  throw new Error("expected the call to fail");
}

/** Every way an error can be printed, logged or serialised. */
function allRenderings(error: Error): string {
  return [error.message, error.stack ?? "", inspect(error, { depth: 10, showHidden: true }), JSON.stringify(error), String(error)].join("\n");
}

function expectNoToken(error: Error, token = TOKEN) {
  const text = allRenderings(error);
  expect(text).not.toContain(token);
  expect(text).not.toContain(Buffer.from(token).toString("base64"));
  expect(text).not.toContain(token.slice(4, 24));
}

describe("vendorFetch: errors", () => {
  it("a token the vendor echoes back (JSON message, header, URL) appears in no rendering of the error", async () => {
    const server = await serve((req, res) =>
      json(res, 401, { message: `bad key ${req.headers.authorization}; also saw x-api-key=${req.headers["x-api-key"]} and ${req.url}`, code: `denied ${TOKEN}` }),
    );
    const error = await failure(
      vendorFetch({ operation: "getSandbox", url: `${server.url}/sandbox/1?api_key=${TOKEN}`, headers: { authorization: `Bearer ${TOKEN}`, "x-api-key": TOKEN } }, { vendor: "daytona" }),
    );
    expect(error).toMatchObject({ status: 401, vendor: "daytona", operation: "getSandbox", retryable: false, gone: false });
    expect(error.message).toMatch(/^daytona getSandbox failed: HTTP 401 /);
    expect(error.message).toContain("bad key [REDACTED]; also saw x-api-key=[REDACTED] and /sandbox/1?api_key=[REDACTED]");
    expectNoToken(error);
  });

  it("a token echoed in a non-JSON body, or a credential the provider never registered, is masked too", async () => {
    const minted = "envd_7a6b5c4d3e2f1a0b9c8d";
    const server = await serve((req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end(`<html><body>Bad gateway for ${req.headers.authorization}\nsession access_token=${minted}</body></html>`);
    });
    const error = await failure(vendorFetch({ operation: "exec", url: server.url, headers: { authorization: `Bearer ${TOKEN}` } }, { vendor: "e2b" }));
    expect(error).toMatchObject({ status: 502, code: "http_502", retryable: true });
    expect(error.detail).toBe("Bad gateway for [REDACTED] session access_token=[REDACTED]");
    expectNoToken(error);
    expectNoToken(error, minted);
  });

  it("URL credentials become a Basic header and never reach the error", async () => {
    const server = await serve((req, res) => json(res, 403, { message: `denied for ${req.headers.authorization} at ${req.url}` }));
    const url = `http://robot:${TOKEN}@127.0.0.1:${server.port}/v1/x`;
    const error = await failure(vendorFetch({ operation: "list", url }, { vendor: "coder" }));
    expect(server.seen[0]!.headers.authorization).toBe(`Basic ${Buffer.from(`robot:${TOKEN}`).toString("base64")}`);
    expect(error.status).toBe(403);
    expectNoToken(error);
  });

  it("an invalid header value holding the token is refused without quoting it", async () => {
    const port = await closedPort();
    const error = await failure(
      vendorFetch({ operation: "get", url: `http://127.0.0.1:${port}/`, headers: { authorization: `Bearer ${TOKEN.slice(0, 10)}\n${TOKEN.slice(10)}` } }, { vendor: "modal" }),
    );
    expect(error).toMatchObject({ code: "invalid_request", status: 0, retryable: false, mayHaveTakenEffect: false });
    expect(allRenderings(error)).not.toContain(TOKEN.slice(10));
    expect(allRenderings(error)).not.toContain(TOKEN.slice(0, 10));
  });

  it("an error with an empty body is an error, not a success; 404 and 410 are gone", async () => {
    const server = await serve((req, res) => {
      res.writeHead(req.url === "/gone" ? 410 : req.url === "/missing" ? 404 : 500, { "content-length": "0" });
      res.end();
    });
    const empty = await failure(vendorFetch({ operation: "create", url: `${server.url}/x`, method: "POST" }, { vendor: "novita" }));
    expect(empty).toMatchObject({ status: 500, code: "http_500", detail: "(empty body)", retryable: true, gone: false });
    expect((await failure(vendorFetch({ operation: "get", url: `${server.url}/missing` }, { vendor: "novita" }))).gone).toBe(true);
    expect((await failure(vendorFetch({ operation: "get", url: `${server.url}/gone` }, { vendor: "novita" }))).gone).toBe(true);
  });

  it("reads message and code from the usual body shapes, and the vendor's not-found code means gone", async () => {
    const bodies: Record<string, [number, unknown, Record<string, string>?]> = {
      "/daytona": [404, { statusCode: 404, error: "Not Found", message: "Sandbox with ID x not found", path: "/sandbox/x" }],
      "/e2b": [404, { code: 404, message: "sandbox not found" }],
      "/connect": [400, { error: { code: "not_found", message: "process 42" } }],
      "/cloudflare": [401, { error: "unauthorized", message: "Missing or invalid bridge bearer token." }, { "x-request-id": "req-77" }],
      "/k8s": [409, { kind: "Status", reason: "AlreadyExists", message: 'pods "p" already exists' }],
      "/501": [501, { message: "not here" }],
      "/503": [503, { detail: "busy" }],
    };
    const server = await serve((req, res) => {
      const [status, body, headers] = bodies[req.url!]!;
      json(res, status, body, headers);
    });
    const get = (path: string) => failure(vendorFetch({ operation: "op", url: server.url + path }, { vendor: "v" }));
    expect(await get("/daytona")).toMatchObject({ code: "Not_Found", detail: "Sandbox with ID x not found", gone: true });
    expect(await get("/e2b")).toMatchObject({ code: "http_404", detail: "sandbox not found", gone: true });
    expect(await get("/connect")).toMatchObject({ status: 400, code: "not_found", detail: "process 42", gone: true, retryable: false });
    const cf = await get("/cloudflare");
    expect(cf).toMatchObject({ code: "unauthorized", requestId: "req-77" });
    expect(cf.message).toBe("v op failed: HTTP 401 unauthorized: Missing or invalid bridge bearer token. [request req-77]");
    expect(await get("/k8s")).toMatchObject({ code: "AlreadyExists", gone: false });
    expect(await get("/501")).toMatchObject({ retryable: false });
    expect(await get("/503")).toMatchObject({ detail: "busy", retryable: true });
  });

  it("a per-vendor extractor can say a 404 is not the sandbox being gone", async () => {
    const server = await serve((_req, res) => json(res, 404, { statusCode: 404, message: "file not found: /p", code: "FILE_NOT_FOUND", source: "DAYTONA_DAEMON" }));
    const error = await failure(
      vendorFetch(
        { operation: "download", url: server.url },
        {
          vendor: "daytona",
          extractError: ({ json: body }) => {
            const b = body as { message?: string; code?: string; source?: string };
            return { message: b.message, code: b.code, gone: b.source === "DAYTONA_DAEMON" ? false : undefined };
          },
        },
      ),
    );
    expect(error).toMatchObject({ code: "FILE_NOT_FOUND", gone: false, status: 404 });
  });

  it("a connection reset is retryable and may have taken effect", async () => {
    const server = await serve((req) => req.socket.destroy());
    const error = await failure(vendorFetch({ operation: "exec", url: server.url, method: "POST", body: "x" }, { vendor: "v" }));
    expect(error).toMatchObject({ status: 0, code: "connection_reset", retryable: true, mayHaveTakenEffect: true });
  });

  it("a refused connection is retryable and certainly had no effect", async () => {
    const port = await closedPort();
    const error = await failure(vendorFetch({ operation: "create", url: `http://127.0.0.1:${port}/`, method: "POST" }, { vendor: "v" }));
    expect(error).toMatchObject({ status: 0, code: "connect_failed", retryable: true, mayHaveTakenEffect: false });
  });

  it("times out a vendor that never answers, and one that stalls in the middle of the body", async () => {
    const server = await serve((req, res) => {
      if (req.url === "/stall") {
        res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
        res.write('{"partial":');
      }
      // otherwise: no answer at all
    });
    for (const path of ["/silent", "/stall"]) {
      const started = Date.now();
      const error = await failure(vendorFetch({ operation: "get", url: server.url + path, timeoutMs: 200 }, { vendor: "v" }));
      expect(error, path).toMatchObject({ status: 0, code: "timeout", retryable: true, detail: "no response within 200 ms" });
      // A bound far from the alternative (a slow machine is not a failure): without the timeout it never answers.
      expect(Date.now() - started).toBeLessThan(30_000);
    }
  });

  it("the caller's signal cancels the call: aborted, not retryable", async () => {
    const server = await serve(() => undefined);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const error = await failure(vendorFetch({ operation: "get", url: server.url, signal: controller.signal }, { vendor: "v", timeoutMs: 10_000 }));
    expect(error).toMatchObject({ code: "aborted", retryable: false });
  });

  it("follows a same-origin GET redirect, refuses to carry credentials to another origin", async () => {
    const other = await serve((req, res) => json(res, 200, { leaked: req.headers["x-api-key"] ?? null }));
    const server = await serve((req, res) => {
      if (req.url === "/old") res.writeHead(302, { location: "/new" }).end();
      else if (req.url === "/away") res.writeHead(307, { location: `${other.url}/steal` }).end();
      else json(res, 200, { at: req.url, key: req.headers["x-api-key"] === TOKEN });
    });
    const headers = { "x-api-key": TOKEN };
    const ok = await vendorFetch({ operation: "get", url: `${server.url}/old`, headers }, { vendor: "v" });
    expect(ok.json()).toEqual({ at: "/new", key: true });
    const error = await failure(vendorFetch({ operation: "get", url: `${server.url}/away`, headers }, { vendor: "v" }));
    expect(error).toMatchObject({ status: 307, code: "redirect", retryable: false });
    expect(other.seen).toHaveLength(0);
  });

  it("bounds the body it buffers, and reports a non-JSON success body as invalid_response", async () => {
    const server = await serve((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(req.url === "/big" ? "x".repeat(4096) : "<html>not json</html>");
    });
    const big = await failure(vendorFetch({ operation: "get", url: `${server.url}/big` }, { vendor: "v", maxResponseBytes: 1024 }));
    expect(big.code).toBe("response_too_large");
    const notJson = await vendorFetch({ operation: "get", url: `${server.url}/html` }, { vendor: "v" });
    expect(() => notJson.json()).toThrow(ProviderApiError);
    expect(() => notJson.json()).toThrow(/invalid_response: the response is not JSON/);
  });

  it("streams a download under the same deadline", async () => {
    const server = await serve((req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream" });
      res.write(Buffer.alloc(1000, 7));
      if (req.url === "/whole") res.end(Buffer.alloc(1000, 8));
      // "/stall": never ends
    });
    const whole = await vendorFetchStream({ operation: "download", url: `${server.url}/whole` }, { vendor: "v" });
    expect(Buffer.from(await new Response(whole.body).arrayBuffer()).length).toBe(2000);
    const stalled = await vendorFetchStream({ operation: "download", url: `${server.url}/stall`, timeoutMs: 300 }, { vendor: "v" });
    const error = await failure(new Response(stalled.body).arrayBuffer());
    expect(error.code).toBe("timeout");
  });
});

describe("retries through the client", () => {
  it("503 then success: an idempotent call is retried and the hook sees the retry", async () => {
    const server = await serve((_req, res, _seen, index) => (index === 0 ? json(res, 503, { message: "warming up" }) : json(res, 200, { id: "sb-1" })));
    const retries: unknown[] = [];
    const client = createVendorClient({ vendor: "daytona", baseUrl: `${server.url}/api`, retry: { baseDelayMs: 10 }, onRetry: (e) => retries.push(e) });
    expect(await client.json({ operation: "getSandbox", path: ["sandbox", "sb-1"], idempotent: true })).toEqual({ id: "sb-1" });
    expect(server.seen.map((s) => s.url)).toEqual(["/api/sandbox/sb-1", "/api/sandbox/sb-1"]);
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ operation: "getSandbox", attempt: 1, error: { status: 503 } });
  });

  it("a non-idempotent call that reached the vendor is never retried", async () => {
    const server = await serve((_req, res) => json(res, 503, { message: "try later" }, { "retry-after": "0" }));
    const client = createVendorClient({ vendor: "e2b", baseUrl: server.url, retry: { baseDelayMs: 1 } });
    const error = await failure(client.request({ operation: "createSandbox", method: "POST", path: "/sandboxes", json: { template: "base" }, idempotent: false }));
    expect(server.seen).toHaveLength(1);
    expect(error).toMatchObject({ status: 503, retryable: true, mayHaveTakenEffect: true });
  });

  it("a non-idempotent call is retried when the connection was refused (it never reached the vendor)", async () => {
    const port = await closedPort();
    const client = createVendorClient({ vendor: "e2b", baseUrl: `http://127.0.0.1:${port}`, retry: { attempts: 3, baseDelayMs: 1 } });
    const error = await failure(client.request({ operation: "createSandbox", method: "POST", path: "/sandboxes", idempotent: false }));
    expect(error).toMatchObject({ code: "connect_failed", attempts: 3 });
    expect(error.message).toMatch(/\(after 3 attempts\)$/);
  });

  it("a connection reset is retried for an idempotent call", async () => {
    const server = await serve((req, res, _seen, index) => (index === 0 ? req.socket.destroy() : json(res, 200, { ok: true })));
    const client = createVendorClient({ vendor: "v", baseUrl: server.url, retry: { baseDelayMs: 1 } });
    expect(await client.json({ operation: "get", path: "/x", idempotent: true })).toEqual({ ok: true });
    expect(server.seen).toHaveLength(2);
  });

  it("honours Retry-After in seconds in real time", async () => {
    const server = await serve((_req, res, _seen, index) => (index === 0 ? json(res, 429, { message: "slow down" }, { "retry-after": "1" }) : json(res, 200, {})));
    const client = createVendorClient({ vendor: "v", baseUrl: server.url, retry: { baseDelayMs: 1 } });
    const started = Date.now();
    await client.json({ operation: "get", path: "/", idempotent: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
    expect(server.seen).toHaveLength(2);
  });

  it("429 with Retry-After as seconds and as an HTTP-date sets the wait", async () => {
    const at = Date.parse("2026-03-01T12:00:00Z");
    const forms = ["7", new Date(at + 3_000).toUTCString()];
    const server = await serve((_req, res, _seen, index) => (index < 2 ? json(res, 429, { message: "rate limited" }, { "retry-after": forms[index]! }) : json(res, 200, { done: true })));
    const waits: number[] = [];
    const result = await withRetry(async () => (await vendorFetch({ operation: "list", url: server.url }, { vendor: "v", now: () => at })).json(), {
      idempotent: true,
      random: () => 0,
      now: () => at,
      sleep: async (ms) => void waits.push(ms),
    });
    expect(result).toEqual({ done: true });
    expect(waits).toEqual([7_000, 3_000]);
  });

  it("gives up when the budget is spent: attempts, or a Retry-After past the total time", async () => {
    const server = await serve((req, res) => json(res, 503, { message: "down" }, req.url === "/long" ? { "retry-after": "30" } : {}));
    const client = createVendorClient({ vendor: "v", baseUrl: server.url, retry: { attempts: 3, baseDelayMs: 1, totalMs: 5_000 } });
    const byAttempts = await failure(client.request({ operation: "get", path: "/short", idempotent: true }));
    expect(byAttempts).toMatchObject({ status: 503, attempts: 3 });
    expect(server.seen.filter((s) => s.url === "/short")).toHaveLength(3);
    const started = Date.now();
    const byTime = await failure(client.request({ operation: "get", path: "/long", idempotent: true }));
    expect(byTime.retryAfterMs).toBe(30_000);
    expect(server.seen.filter((s) => s.url === "/long")).toHaveLength(1);
    // A bound far from the alternative (a slow machine is not a failure): waiting out the Retry-After takes 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("the caller's signal ends the wait between attempts", async () => {
    const server = await serve((_req, res) => json(res, 503, {}, { "retry-after": "20" }));
    const client = createVendorClient({ vendor: "v", baseUrl: server.url, retry: { totalMs: 60_000 } });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const error = await failure(client.request({ operation: "get", path: "/", idempotent: true, signal: controller.signal }));
    expect(error).toMatchObject({ code: "aborted", retryable: false, status: 503 });
  });

  it("refuses a path segment that would climb out of the API root", () => {
    const client = createVendorClient({ vendor: "v", baseUrl: "http://127.0.0.1:1/api" });
    expect(() => client.request({ operation: "get", path: ["sandbox", ".."], idempotent: true })).toThrow(/may not be empty, "." or ".."/);
  });
});
