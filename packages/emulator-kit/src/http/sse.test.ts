import { afterEach, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

describe("SSE writer", () => {
  it("sends events as event/data frames and keepalive comments while idle", async () => {
    emulator = await runEmulator(echoEmulator);
    const response = await fetch(`${emulator.url}/events?count=2&intervalMs=250&keepaliveMs=40`);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("cache-control")).toBe("no-cache");
    const text = await response.text();
    const frames = text.split("\n\n").filter(Boolean);
    const keepalives = frames.filter((frame) => frame === ": keepalive").length;
    // ~500 ms of silence between events at a 40 ms interval: several comments, not a fixed count.
    expect(keepalives).toBeGreaterThanOrEqual(3);
    expect(frames.filter((frame) => frame !== ": keepalive")).toEqual(['event: tick\ndata: {"n":1}', 'event: tick\ndata: {"n":2}', 'event: done\ndata: {"exitCode":0}']);
    await emulator.requests.idle();
    expect(emulator.requests.list({ route: "/events" })[0]).toMatchObject({ messagesOut: 3, bytesOut: Buffer.byteLength(text) });
  });

  it("stops its keepalive timer when the client leaves", async () => {
    emulator = await runEmulator(echoEmulator);
    const controller = new AbortController();
    const response = await fetch(`${emulator.url}/events?count=1000&intervalMs=1000&keepaliveMs=20`, { signal: controller.signal });
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    await emulator.requests.idle(2000); // the handler saw the abort and the record finished
    expect(emulator.requests.list({ route: "/events" })[0]!.done).toBe(true);
  });
});
