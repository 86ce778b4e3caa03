import http2 from "node:http2";
import https from "node:https";
import { afterEach, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

function h2Request(origin: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string; ca?: string } = {}) {
  return new Promise<{ status: number; body: string; headers: http2.IncomingHttpHeaders }>((resolve, reject) => {
    const session = http2.connect(origin, options.ca ? { ca: options.ca } : {});
    session.on("error", reject);
    const request = session.request({ ":method": options.method ?? "GET", ":path": path, ...options.headers });
    let status = 0;
    let headers: http2.IncomingHttpHeaders = {};
    let body = "";
    request.on("response", (h) => {
      headers = h;
      status = Number(h[":status"]);
    });
    request.setEncoding("utf8");
    request.on("data", (chunk: string) => (body += chunk));
    request.on("end", () => {
      session.close();
      resolve({ status, body, headers });
    });
    request.on("error", reject);
    request.end(options.body);
  });
}

describe("HTTP server", () => {
  it("routes by method and pattern, parses params and query, answers 404 and 405 in the vendor envelope", async () => {
    emulator = await runEmulator(echoEmulator);
    const key = emulator.credentials.apiKey!;
    const created = await fetch(`${emulator.url}/items`, { method: "POST", headers: { "x-api-key": key }, body: JSON.stringify({ name: "a" }) });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const deleted = await fetch(`${emulator.url}/items/${encodeURIComponent(id)}`, { method: "DELETE", headers: { "x-api-key": key } });
    expect(deleted.status).toBe(204);
    const again = await fetch(`${emulator.url}/items/${id}`, { method: "DELETE", headers: { "x-api-key": key } });
    expect(again.status).toBe(404);
    expect(await again.json()).toEqual({ code: 404, message: `item ${id} not found` });

    const echoed = await fetch(`${emulator.url}/echo?state=running&state=paused&x=%2Fa`, { method: "POST", headers: { "x-api-key": key }, body: "{}" });
    expect(await echoed.json()).toEqual({ method: "POST", body: {}, query: { state: "paused", x: "/a" } });

    const missing = await fetch(`${emulator.url}/nowhere`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ code: 404, message: "no route for GET /nowhere" });
    const wrongMethod = await fetch(`${emulator.url}/items/x`, { method: "PUT" });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("DELETE");
  });

  it("serves many requests at once without a listener-leak warning (one 'closing' listener per request in flight)", async () => {
    emulator = await runEmulator(echoEmulator);
    const key = emulator.credentials.apiKey!;
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const streams = Array.from({ length: 12 }, () => fetch(`${emulator!.url}/events?count=3&intervalMs=20`, { headers: { "x-api-key": key } }).then((r) => r.text()));
      for (const body of await Promise.all(streams)) expect(body).toContain("event: done");
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message)).toEqual([]);
  });

  it("caps JSON bodies (413) and rejects bad JSON (400) and bad query values (400)", async () => {
    emulator = await runEmulator(echoEmulator);
    const key = emulator.credentials.apiKey!;
    const big = await fetch(`${emulator.url}/echo`, { method: "POST", headers: { "x-api-key": key }, body: JSON.stringify({ x: "y".repeat(70_000) }) });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { message: string }).message).toMatch(/65536-byte limit/);
    const bad = await fetch(`${emulator.url}/echo`, { method: "POST", headers: { "x-api-key": key }, body: "{nope" });
    expect(bad.status).toBe(400);
    const badLimit = await fetch(`${emulator.url}/items?limit=abc`, { headers: { "x-api-key": key } });
    expect(badLimit.status).toBe(400);
    expect(((await badLimit.json()) as { message: string }).message).toBe('query parameter limit: must be an integer within 1..100 (got "abc")');
  });

  it("serves HTTP/2 with prior knowledge (h2c) on the same port", async () => {
    emulator = await runEmulator(echoEmulator);
    const response = await h2Request(emulator.url, "/echo?via=h2", {
      method: "POST",
      headers: { "x-api-key": emulator.credentials.apiKey!, "content-type": "application/json" },
      body: JSON.stringify({ n: 1 }),
    });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ method: "POST", body: { n: 1 }, query: { via: "h2" } });
    const unauthorized = await h2Request(emulator.url, "/echo", { method: "POST" });
    expect(unauthorized.status).toBe(401);
    await emulator.requests.idle();
    expect(emulator.requests.list({ route: "/echo" }).map((r) => r.status)).toEqual([200, 401]);
  });

  it("serves TLS with a self-signed certificate the client trusts by CA: h2 by ALPN and HTTP/1.1", async () => {
    emulator = await runEmulator(echoEmulator, { options: { tls: true } });
    const ca = emulator.caPem!;
    expect(ca).toMatch(/BEGIN CERTIFICATE/);
    const secure = emulator.endpoints.https!;
    expect(secure).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const viaH2 = await h2Request(secure, "/health", { ca });
    expect(viaH2.status).toBe(204);
    const viaH1 = await new Promise<{ status: number; version: string }>((resolve, reject) => {
      https
        .get(`${secure}/health`, { ca }, (res) => {
          res.resume();
          resolve({ status: res.statusCode!, version: res.httpVersion });
        })
        .on("error", reject);
    });
    expect(viaH1).toEqual({ status: 204, version: "1.1" });
    // Without the CA the certificate is refused: it is really checked.
    await expect(h2Request(secure, "/health")).rejects.toThrow(/self[- ]signed|unable to verify/i);
    // Plain HTTP still works on the same port.
    expect((await fetch(`${emulator.url}/health`)).status).toBe(204);
  });
});
