import { afterEach, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";
import { connectRequest, parseConnectStream } from "../__fixtures__/echo-clients.js";
import { CONNECT_CODE_STATUS, connectCodeForStatus } from "./codes.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

const unary = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${emulator!.url}/echo.v1.EchoService/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "connect-protocol-version": "1", ...headers },
    body: JSON.stringify(body),
  });

const stream = async (body: object, headers: Record<string, string> = {}) => {
  const response = await fetch(`${emulator!.url}/echo.v1.EchoService/Count`, {
    method: "POST",
    headers: { "content-type": "application/connect+json", "connect-protocol-version": "1", "x-api-key": emulator!.credentials.apiKey!, ...headers },
    body: connectRequest(body),
  });
  return { status: response.status, type: response.headers.get("content-type"), ...parseConnectStream(Buffer.from(await response.arrayBuffer())) };
};

describe("Connect protocol (JSON codec)", () => {
  it("unary: answers JSON, and errors as {code, message} with the protocol's HTTP status", async () => {
    emulator = await runEmulator(echoEmulator);
    const ok = await unary("Say", { text: "hi" });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toBe("application/json");
    expect(await ok.json()).toEqual({ text: "hi" });
    const bad = await unary("Say", { text: 5 });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ code: "invalid_argument", message: "text: must be a string" });
    const wrongType = await fetch(`${emulator.url}/echo.v1.EchoService/Say`, { method: "POST", headers: { "content-type": "application/proto" }, body: "x" });
    expect(wrongType.status).toBe(415);
    await emulator.requests.idle();
    expect(emulator.requests.list({ route: "/echo.v1.EchoService/Say" }).map((r) => r.code)).toEqual(["ok", "invalid_argument", undefined]);
  });

  it("unary: Connect-Timeout-Ms is the handler's deadline; the call ends deadline_exceeded (504)", async () => {
    emulator = await runEmulator(echoEmulator);
    const started = performance.now();
    const late = await unary("Sleep", { ms: 5000 }, { "connect-timeout-ms": "100" });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(late.status).toBe(504);
    expect(await late.json()).toEqual({ code: "deadline_exceeded", message: "deadline of 100 ms exceeded" });
    expect(await (await unary("Sleep", { ms: 10 }, { "connect-timeout-ms": "2000" })).json()).toMatchObject({ sleptMs: expect.any(Number) });
    const invalid = await unary("Sleep", { ms: 1 }, { "connect-timeout-ms": "12345678901" });
    expect(invalid.status).toBe(400);
  });

  it("server stream: enveloped messages then an end-stream {} with HTTP 200", async () => {
    emulator = await runEmulator(echoEmulator);
    const result = await stream({ count: 3 });
    expect(result.status).toBe(200);
    expect(result.type).toBe("application/connect+json");
    expect(result.messages).toEqual([{ event: { tick: 1 } }, { event: { tick: 2 } }, { event: { tick: 3 } }, { event: { end: { exitCode: 0 } } }]);
    expect(result.end).toEqual({});
    await emulator.requests.idle();
    expect(emulator.requests.list({ route: "/echo.v1.EchoService/Count" })[0]).toMatchObject({ messagesIn: 1, messagesOut: 4, code: "ok", status: 200 });
  });

  it("server stream: errors travel in the end-stream message with HTTP 200 (auth, deadline)", async () => {
    emulator = await runEmulator(echoEmulator);
    const unauthenticated = await stream({ count: 1 }, { "x-api-key": "nope" });
    expect(unauthenticated.status).toBe(200);
    expect(unauthenticated.end).toEqual({ error: { code: "unauthenticated", message: "invalid credentials" } });

    const late = await stream({ count: 50, intervalMs: 40 }, { "connect-timeout-ms": "150" });
    expect(late.status).toBe(200);
    expect(late.messages.length).toBeGreaterThan(0);
    expect(late.messages.length).toBeLessThan(50);
    expect(late.end).toEqual({ error: { code: "deadline_exceeded", message: "deadline of 150 ms exceeded" } });
  });

  it("maps codes to HTTP statuses and back", () => {
    expect(CONNECT_CODE_STATUS.not_found).toBe(404);
    expect(CONNECT_CODE_STATUS.resource_exhausted).toBe(429);
    expect(CONNECT_CODE_STATUS.unavailable).toBe(503);
    expect(connectCodeForStatus(503)).toBe("unavailable");
    expect(connectCodeForStatus(429)).toBe("resource_exhausted");
    expect(connectCodeForStatus(500)).toBe("internal");
  });

  it("faults on Connect routes answer Connect-shaped errors", async () => {
    emulator = await runEmulator(echoEmulator);
    emulator.faults.inject({ kind: "status", status: 503, route: "/echo.v1.EchoService/Say", times: 1 });
    const failed = await unary("Say", { text: "x" });
    expect(failed.status).toBe(503);
    expect(await failed.json()).toEqual({ code: "unavailable", message: "injected fault: service unavailable" });
  });
});
