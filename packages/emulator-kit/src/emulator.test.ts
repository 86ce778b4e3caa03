import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createEmulatorRegistry, runEmulator, type EmulatorDefinition, type RunningEmulator } from "./emulator.js";
import { echoEmulator } from "./example/echo.js";
import { createRouter } from "./http/router.js";
import { connectRequest } from "./__fixtures__/echo-clients.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

const portIsFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const probe = net.createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });

describe("emulator registry", () => {
  it("starts an emulator by name with URL, credentials, env, recorder and faults", async () => {
    const registry = createEmulatorRegistry([echoEmulator]);
    expect(registry.describe()).toEqual([{ name: "echo", description: echoEmulator.description }]);
    emulator = await registry.startEmulator("echo");
    expect(emulator.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(emulator.credentials.apiKey).toMatch(/^echo_/);
    expect(emulator.env.ECHO_API_URL).toBe(emulator.url);
    expect((await fetch(`${emulator.url}/health`)).status).toBe(204);
    await emulator.requests.idle();
    expect(emulator.requests.count({ route: "/health" })).toBe(1);
    await expect(registry.startEmulator("nope")).rejects.toThrow('unknown emulator "nope" (known: echo)');
    expect(() => createEmulatorRegistry([echoEmulator, echoEmulator])).toThrow('emulator name: "echo" is registered twice');
  });

  it("gives each start fresh credentials and state; leftovers report what is still held", async () => {
    emulator = await runEmulator(echoEmulator);
    const other = await runEmulator(echoEmulator);
    try {
      expect(other.credentials.apiKey).not.toBe(emulator.credentials.apiKey);
      const headers = { "x-api-key": emulator.credentials.apiKey! };
      const created = (await (await fetch(`${emulator.url}/items`, { method: "POST", headers, body: JSON.stringify({ name: "a" }) })).json()) as { id: string };
      expect(await emulator.leftovers()).toEqual([`item ${created.id}`]);
      expect(await other.leftovers()).toEqual([]);
      await fetch(`${emulator.url}/items/${created.id}`, { method: "DELETE", headers });
      expect(await emulator.leftovers()).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it("close() stops everything: ports released, WebSockets and hung streams ended, idempotent", async () => {
    emulator = await runEmulator(echoEmulator);
    const httpPort = Number(new URL(emulator.url).port);
    const grpcPort = Number(emulator.endpoints.grpc!.split(":")[1]);
    const socket = new WebSocket(`${emulator.url.replace("http", "ws")}/ws/echo`, { headers: { authorization: `Bearer ${emulator.credentials.token}` } });
    await new Promise((resolve) => socket.once("open", resolve));
    const socketClosed = new Promise((resolve) => socket.once("close", resolve));
    emulator.faults.inject({ kind: "exit-frame", then: "hang", route: "/echo.v1.EchoService/Count" });
    const hung = fetch(`${emulator.url}/echo.v1.EchoService/Count`, {
      method: "POST",
      headers: { "content-type": "application/connect+json", "x-api-key": emulator.credentials.apiKey! },
      body: connectRequest({ count: 1 }),
    }).then((response) => response.arrayBuffer());
    await new Promise((resolve) => setTimeout(resolve, 100));
    await Promise.all([emulator.close(), emulator.close()]);
    await socketClosed;
    await expect(hung).rejects.toThrow();
    expect(await portIsFree(httpPort)).toBe(true);
    expect(await portIsFree(grpcPort)).toBe(true);
    emulator = undefined;
  });

  it("closes what it started when an emulator's start fails", async () => {
    let port = 0;
    const broken: EmulatorDefinition = {
      name: "broken",
      description: "starts a server, then fails",
      async start(kit) {
        const server = await kit.http(createRouter());
        port = server.port;
        await kit.caFile();
        throw new Error("vendor state could not be loaded");
      },
    };
    await expect(runEmulator(broken)).rejects.toThrow("vendor state could not be loaded");
    expect(port).toBeGreaterThan(0);
    expect(await portIsFree(port)).toBe(true);
  });
});
