import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";
import { bearer, echoGrpcClient, unary } from "../__fixtures__/echo-clients.js";
import { createRequestRecorder } from "./recorder.js";
import { REDACTED, redactHeaders } from "./redact-headers.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

describe("request recorder", () => {
  it("records route patterns, statuses, bytes and latency for HTTP, WebSocket and gRPC calls", async () => {
    emulator = await runEmulator(echoEmulator);
    const { apiKey, token } = emulator.credentials as Record<string, string>;
    const body = JSON.stringify({ name: "sandbox-1" });
    const created = await fetch(`${emulator.url}/items`, { method: "POST", headers: { "x-api-key": apiKey! }, body });
    const answer = await created.text();
    await fetch(`${emulator.url}/items/item-0001`, { method: "DELETE" }); // 401: no key

    const socket = new WebSocket(`${emulator.url.replace("http", "ws")}/ws/echo`, { headers: { authorization: `Bearer ${token}` } });
    await new Promise((resolve) => socket.once("open", resolve));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.send("hello");
    socket.send(Buffer.from([1, 2, 3]));
    await new Promise<void>((resolve) => {
      let seen = 0;
      socket.on("message", () => ++seen === 2 && resolve());
    });
    socket.close();
    await closed;

    const client = echoGrpcClient(emulator.endpoints.grpc!);
    await unary(client, "Say", { text: "hi" }, bearer(token!));
    client.close();
    await emulator.requests.idle();

    const [create, unauthorized] = emulator.requests.list({ protocol: "http" });
    expect(create).toMatchObject({ method: "POST", route: "/items", path: "/items", status: 201, bytesIn: body.length, bytesOut: answer.length, done: true });
    expect(create!.latencyMs).toBeGreaterThan(0);
    expect(create!.startedAt).toBeLessThanOrEqual(Date.now());
    expect(unauthorized).toMatchObject({ method: "DELETE", route: "/items/:id", path: "/items/item-0001", status: 401 });
    const [ws] = emulator.requests.list({ protocol: "ws" });
    expect(ws).toMatchObject({ route: "/ws/echo", status: 101, code: "close:1005", messagesIn: 2, messagesOut: 2, bytesIn: 8, bytesOut: 8 });
    const [call] = emulator.requests.list({ protocol: "grpc" });
    expect(call).toMatchObject({ route: "/echo.v1.Echo/Say", status: 0, code: "OK", messagesIn: 1 });
    expect(call!.bytesIn).toBeGreaterThan(0);
    expect(call!.bytesOut).toBeGreaterThan(0);
    expect(emulator.requests.count({ route: "/items", method: "post" })).toBe(1);
  });

  it("never records secret header values", async () => {
    emulator = await runEmulator(echoEmulator);
    const { apiKey, token } = emulator.credentials as Record<string, string>;
    await fetch(`${emulator.url}/echo?signature=s3cr3t-query`, {
      method: "POST",
      headers: { "x-api-key": apiKey!, authorization: `Bearer ${token}`, cookie: "session=abc", "x-vendor-session-token": "t0k3n", "user-agent": "probe/1" },
      body: "{}",
    });
    const client = echoGrpcClient(emulator.endpoints.grpc!);
    await unary(client, "Say", { text: "hi" }, bearer(token!));
    client.close();
    await emulator.requests.idle();
    const dump = JSON.stringify(emulator.requests.list());
    for (const secret of [apiKey!, token!, "session=abc", "t0k3n", "s3cr3t-query"]) expect(dump).not.toContain(secret);
    const [http] = emulator.requests.list({ protocol: "http" });
    expect(http!.headers["x-api-key"]).toBe(REDACTED);
    expect(http!.headers["user-agent"]).toBe("probe/1");
    expect(emulator.requests.list({ protocol: "grpc" })[0]!.headers.authorization).toBe(REDACTED);
  });

  it("marks, filters, waits for running calls and resets", async () => {
    const recorder = createRequestRecorder();
    const first = recorder.start({ protocol: "http", method: "get", route: "/a", path: "/a", headers: {} });
    first.finish(200);
    const mark = recorder.mark();
    const running = recorder.start({ protocol: "http", method: "GET", route: "/b", path: "/b", headers: {} });
    expect(recorder.list({ since: mark })).toEqual([]);
    expect(recorder.list({ since: mark, includeRunning: true })).toHaveLength(1);
    const idle = recorder.idle(1000);
    setTimeout(() => running.finish(503), 20);
    await idle;
    expect(recorder.list({ since: mark }).map((r) => r.status)).toEqual([503]);
    expect(recorder.list({ status: 200 })[0]!.method).toBe("GET");
    const stuck = recorder.start({ protocol: "grpc", method: "POST", route: "/c", path: "/c", headers: {} });
    await expect(recorder.idle(30)).rejects.toThrow("recorder.idle: 1 call(s) still running after 30 ms");
    stuck.finish(0);
    recorder.reset();
    expect(recorder.count()).toBe(0);
  });

  it("redacts credential-looking header names an emulator did not list", () => {
    expect(redactHeaders({ "X-Modal-Token-Secret": "a", "x-daytona-source": "sdk", ":path": "/x", "x-custom": "b" }, ["x-custom"])).toEqual({
      "x-modal-token-secret": REDACTED,
      "x-daytona-source": "sdk",
      "x-custom": REDACTED,
    });
  });
});
