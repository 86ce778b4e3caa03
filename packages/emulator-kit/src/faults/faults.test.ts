import grpc from "@grpc/grpc-js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";
import { bearer, collectStream, connectRequest, echoGrpcClient, parseConnectStream, unary, type EchoGrpcClient } from "../__fixtures__/echo-clients.js";
import { createRouter } from "../http/router.js";
import { createFaultInjector } from "./injector.js";

let emulator: RunningEmulator;
let client: EchoGrpcClient | undefined;
beforeEach(async () => {
  emulator = await runEmulator(echoEmulator);
});
afterEach(async () => {
  client?.close();
  client = undefined;
  await emulator.close();
});

const key = () => emulator.credentials.apiKey!;
const echo = (init: RequestInit = {}) => fetch(`${emulator.url}/echo`, { method: "POST", body: "{}", ...init, headers: { "x-api-key": key(), ...(init.headers as object) } });

function openWs(path = "/ws/echo"): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${emulator.url.replace("http", "ws")}${path}`, ["v5.echo"], { headers: { authorization: `Bearer ${emulator.credentials.token}` } });
    socket.once("open", () => resolve(socket));
    socket.once("error", reject);
    socket.once("unexpected-response", (_req, res) => reject(new Error(`unexpected ${res.statusCode}`)));
  });
}

function wsTranscript(socket: WebSocket): Promise<{ messages: string[]; code: number }> {
  return new Promise((resolve) => {
    const messages: string[] = [];
    socket.on("message", (data) => messages.push(data.toString()));
    socket.on("close", (code) => resolve({ messages, code }));
  });
}

describe("fault injection, observed from real clients", () => {
  it("latency delays only the matching route, for the next N requests", async () => {
    emulator.faults.inject({ kind: "latency", ms: 300, route: "/echo", times: 1 });
    const started = performance.now();
    expect((await echo()).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    await echo();
    await fetch(`${emulator.url}/health`);
    await emulator.requests.idle();
    // The armed fault was used up by the first call: the others ran without it (no real-clock upper bound).
    const [slow, fast] = emulator.requests.list({ route: "/echo" });
    expect(slow!.faults).toEqual(["latency"]);
    expect(slow!.latencyMs).toBeGreaterThanOrEqual(290);
    expect(fast!.faults).toEqual([]);
    expect(emulator.requests.list({ route: "/health" }).map((r) => r.faults)).toEqual([[]]);
    expect(emulator.faults.applied().map((a) => [a.kind, a.route])).toEqual([["latency", "/echo"]]);
  });

  it("status answers a 5xx in the vendor envelope without running the handler", async () => {
    emulator.faults.inject({ kind: "status", status: 502, route: "/items", method: "POST", times: 1 });
    const post = () => fetch(`${emulator.url}/items`, { method: "POST", headers: { "x-api-key": key() }, body: JSON.stringify({ name: "x" }) });
    const failed = await post();
    expect(failed.status).toBe(502);
    expect(await failed.json()).toEqual({ code: 502, message: "injected fault: service unavailable" });
    expect(await emulator.leftovers()).toEqual([]); // the handler never ran
    expect((await post()).status).toBe(201);
  });

  it("rate-limit answers 429 with an integer Retry-After", async () => {
    emulator.faults.inject({ kind: "rate-limit", retryAfterSeconds: 7, route: "*", times: 2 });
    const first = await echo();
    expect(first.status).toBe(429);
    expect(first.headers.get("retry-after")).toBe("7");
    expect((await fetch(`${emulator.url}/health`)).status).toBe(429);
    expect((await echo()).status).toBe(200);
    expect(emulator.faults.applied().map((a) => [a.kind, a.route])).toEqual([
      ["rate-limit", "/echo"],
      ["rate-limit", "/health"],
    ]);
  });

  it("reset sends the status and headers, then destroys the connection mid-body", async () => {
    emulator.faults.inject({ kind: "reset", afterBytes: 100, route: "/bytes", times: 1 });
    const response = await fetch(`${emulator.url}/bytes?size=5000`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-length")).toBe("5000");
    await expect(response.arrayBuffer()).rejects.toThrow(/terminated|other side closed|socket/i);
    // The next request on a fresh connection is whole.
    const whole = await fetch(`${emulator.url}/bytes?size=5000`);
    expect((await whole.arrayBuffer()).byteLength).toBe(5000);
    await emulator.requests.idle();
    const [cut] = emulator.requests.list({ route: "/bytes" });
    expect(cut!.faults).toEqual(["reset"]);
    expect(cut!.bytesOut).toBe(100);
  });

  it("probability and skip choose which requests fail (seeded randomness)", async () => {
    const values = [0.9, 0.1, 0.6, 0.2];
    const faults = createFaultInjector({ random: () => values.shift() ?? 1 });
    faults.inject({ kind: "status", route: "/r", probability: 0.5, skip: 1 });
    const hits = [1, 2, 3, 4, 5].map(() => Boolean(faults.take("status", { route: "/r" })));
    // call 1 skipped; then randoms 0.9 (no), 0.1 (yes), 0.6 (no), 0.2 (yes)
    expect(hits).toEqual([false, false, true, false, true]);
    expect(() => faults.inject({ kind: "status", route: "/r", probability: 2 })).toThrow("fault probability: must be within 0..1 (got 2)");
    expect(() => faults.inject({ kind: "latency", route: "/r", ms: -1 })).toThrow(/fault ms/);
  });

  it("drop-stream cuts an SSE stream after N events, with no done event", async () => {
    emulator.faults.inject({ kind: "drop-stream", afterMessages: 2, route: "/events", times: 1 });
    const response = await fetch(`${emulator.url}/events?count=5&intervalMs=5&keepaliveMs=0`);
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let text = "";
    await expect(
      (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          text += Buffer.from(value).toString();
        }
      })(),
    ).rejects.toThrow(/terminated/);
    expect(text.match(/event: tick/g)).toHaveLength(2);
    expect(text).not.toContain("event: done");
  });

  it("drop-stream cuts a Connect server stream before its end-stream message", async () => {
    emulator.faults.inject({ kind: "drop-stream", afterMessages: 1, route: "/echo.v1.EchoService/Count" });
    const response = await fetch(`${emulator.url}/echo.v1.EchoService/Count`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", "x-api-key": key() },
      body: connectRequest({ count: 3 }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const received: Buffer[] = [];
    await expect(
      (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          received.push(Buffer.from(value));
        }
      })(),
    ).rejects.toThrow(/terminated/);
    const stream = parseConnectStream(Buffer.concat(received));
    expect(stream.messages).toEqual([{ event: { tick: 1 } }]);
    expect(stream.endSeen).toBe(false);
  });

  it("drop-stream terminates a WebSocket after N server messages (close 1006, no close frame)", async () => {
    emulator.faults.inject({ kind: "drop-stream", afterMessages: 2, route: "/ws/echo" });
    const socket = await openWs();
    const transcript = wsTranscript(socket);
    for (const text of ["a", "b", "c"]) socket.send(text);
    const { messages, code } = await transcript;
    expect(messages).toEqual(["a", "b"]);
    expect(code).toBe(1006);
    await emulator.requests.idle();
    const [record] = emulator.requests.list({ protocol: "ws" });
    expect(record).toMatchObject({ route: "/ws/echo", status: 101, messagesOut: 2, faults: ["drop-stream"] });
  });

  it("drop-stream cuts a gRPC server stream: the client gets UNAVAILABLE, not OK", async () => {
    emulator.faults.inject({ kind: "drop-stream", afterMessages: 2, route: "/echo.v1.Echo/Count" });
    client = echoGrpcClient(emulator.endpoints.grpc!);
    const result = await collectStream(client.Count!({ count: 5, interval_ms: 5 }, bearer(emulator.credentials.token!)));
    expect(result.messages).toEqual([
      { tick: 1, event: "tick" },
      { tick: 2, event: "tick" },
    ]);
    expect(result.error?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it("status, rate-limit, latency and reset faults reach gRPC clients as statuses", async () => {
    client = echoGrpcClient(emulator.endpoints.grpc!);
    const md = () => bearer(emulator.credentials.token!);
    emulator.faults.inject({ kind: "status", grpcCode: grpc.status.INTERNAL, route: "/echo.v1.Echo/Say", times: 1 });
    await expect(unary(client, "Say", { text: "x" }, md())).rejects.toMatchObject({ code: grpc.status.INTERNAL });
    emulator.faults.inject({ kind: "rate-limit", retryAfterSeconds: 3, route: "/echo.v1.Echo/Say", times: 1 });
    const limited = await unary(client, "Say", { text: "x" }, md()).catch((e: grpc.ServiceError) => e);
    expect((limited as grpc.ServiceError).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect((limited as grpc.ServiceError).metadata.get("retry-after")).toEqual(["3"]);
    emulator.faults.inject({ kind: "latency", ms: 250, route: "/echo.v1.Echo/Say", times: 1 });
    const started = performance.now();
    await expect(unary(client, "Say", { text: "slow" }, md())).resolves.toMatchObject({ text: "slow" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(240);
    emulator.faults.inject({ kind: "reset", route: "/echo.v1.Echo/Say", times: 1 });
    await expect(unary(client, "Say", { text: "x" }, md())).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    await expect(unary(client, "Say", { text: "ok" }, md())).resolves.toMatchObject({ text: "ok" });
  });

  it("exit-frame: the emulator's final message is suppressed, then the stream ends (Connect) or hangs (gRPC, WebSocket)", async () => {
    emulator.faults.inject({ kind: "exit-frame", route: "/echo.v1.EchoService/Count", times: 1 });
    const response = await fetch(`${emulator.url}/echo.v1.EchoService/Count`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", "x-api-key": key() },
      body: connectRequest({ count: 2 }),
    });
    const stream = parseConnectStream(Buffer.from(await response.arrayBuffer()));
    expect(stream.messages).toEqual([{ event: { tick: 1 } }, { event: { tick: 2 } }]); // no { end }
    expect(stream.end).toEqual({});

    emulator.faults.inject({ kind: "exit-frame", then: "hang", route: "/echo.v1.Echo/Count", times: 1 });
    client = echoGrpcClient(emulator.endpoints.grpc!);
    const hung = await collectStream(client.Count!({ count: 1, interval_ms: 0 }, bearer(emulator.credentials.token!), { deadline: Date.now() + 400 }));
    expect(hung.messages).toEqual([{ tick: 1, event: "tick" }]);
    expect(hung.error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);

    emulator.faults.inject({ kind: "exit-frame", then: "hang", route: "/ws/echo", times: 1 });
    const socket = await openWs();
    const messages: string[] = [];
    socket.on("message", (data) => messages.push(data.toString()));
    socket.send("exit");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(messages).toEqual([]);
    expect(socket.readyState).toBe(WebSocket.OPEN); // hung: neither exit frame nor close
    socket.terminate();
    await emulator.requests.idle();
    expect(emulator.requests.list({ route: "/ws/echo" })[0]!.faults).toEqual(["exit-frame"]);
  });

  it("faults on WebSocket upgrades answer HTTP errors before the handshake", async () => {
    emulator.faults.inject({ kind: "status", status: 503, route: "/ws/echo", times: 1 });
    await expect(openWs()).rejects.toThrow("unexpected 503");
    const socket = await openWs();
    socket.close();
  });
});

describe("fault injection and a vendor's internal hop", () => {
  it("a fault on every route passes an internal server by; one naming its route still applies", async () => {
    const twoHops = await runEmulator({
      name: "two-hops",
      description: "an API and, behind it, a hop inside the vendor",
      async start(kit) {
        const inside = createRouter();
        inside.get("/inside", () => ({ ok: true }));
        const behind = await kit.http(inside, { internal: true });
        const front = createRouter();
        front.get("/front", () => ({ ok: true }));
        const api = await kit.http(front);
        return { url: api.url, endpoints: { inside: behind.url }, credentials: {} };
      },
    });
    try {
      twoHops.faults.inject({ kind: "status", status: 503, route: "*" });
      expect((await fetch(`${twoHops.url}/front`)).status).toBe(503);
      expect((await fetch(`${twoHops.endpoints.inside}/inside`)).status).toBe(200);
      twoHops.faults.clear();
      twoHops.faults.inject({ kind: "status", status: 503, route: "/inside", times: 1 });
      expect((await fetch(`${twoHops.endpoints.inside}/inside`)).status).toBe(503);
      expect(twoHops.faults.applied().map((a) => a.route)).toEqual(["/inside"]);
    } finally {
      await twoHops.close();
    }
  });
});
