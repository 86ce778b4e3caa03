import grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator, type EchoOptions } from "../example/echo.js";
import { createRouter } from "../http/router.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

/** A raw unary call to any method path (the generated client only knows the proto's methods). */
function callPath(target: string, path: string): Promise<grpc.ServiceError | null> {
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      path,
      (x: Buffer) => x,
      (x: Buffer) => x,
      Buffer.alloc(0),
      (error) => {
        client.close();
        resolve(error);
      },
    );
  });
}

describe("the recorder records calls the emulator does not serve", () => {
  it("an unknown HTTP path, a wrong method and an unknown WebSocket path are recorded as unserved", async () => {
    emulator = await runEmulator(echoEmulator);
    expect((await fetch(`${emulator.url}/no/such/route`)).status).toBe(404);
    expect((await fetch(`${emulator.url}/health`, { method: "DELETE" })).status).toBe(405);
    const socket = new WebSocket(`${emulator.url.replace("http", "ws")}/ws/nope`);
    socket.on("error", () => undefined);
    await new Promise((resolve) => socket.once("unexpected-response", (_req, res) => resolve(res.resume())));
    await emulator.requests.idle();
    const unserved = emulator.requests.list({ unserved: true });
    expect(unserved.map((r) => [r.protocol, r.method, r.path, r.unserved])).toEqual([
      ["http", "GET", "/no/such/route", "no route"],
      ["http", "DELETE", "/health", "method not allowed"],
      ["ws", "GET", "/ws/nope", "no route"],
    ]);
    expect(emulator.requests.count({ unserved: false })).toBe(0);
  });

  it("a gRPC method outside the proto is recorded (grpc-js answers it before any handler)", async () => {
    emulator = await runEmulator(echoEmulator);
    const error = await callPath(emulator.endpoints.grpc!, "/echo.v1.Echo/Missing");
    expect(error?.code).toBe(grpc.status.UNIMPLEMENTED);
    await callPath(emulator.endpoints.grpc!, "/echo.v1.Echo/Missing");
    await emulator.requests.idle();
    expect(emulator.requests.list({ protocol: "grpc" })).toMatchObject([
      { route: null, path: "/echo.v1.Echo/Missing", status: grpc.status.UNIMPLEMENTED, code: "UNIMPLEMENTED", unserved: "not in the proto" },
      { path: "/echo.v1.Echo/Missing" },
    ]);
    expect(emulator.requests.unserved()).toEqual([{ protocol: "grpc", method: "POST", target: "/echo.v1.Echo/Missing", reason: "not in the proto", count: 2 }]);
  });

  it("a gRPC method refused on purpose answers UNIMPLEMENTED with the reason, recorded as refused", async () => {
    const { echoEmulator: base } = await import("../example/echo.js");
    emulator = await runEmulator<EchoOptions>({
      ...base,
      name: "echo-refusing",
      async start(kit, options) {
        const parts = await base.start({ ...kit, grpc: (grpcOptions) => kit.grpc({ ...grpcOptions, refused: { "/echo.v1.Echo/Snapshot": "no snapshots here" } }) }, options);
        return parts;
      },
    });
    const error = await callPath(emulator.endpoints.grpc!, "/echo.v1.Echo/Snapshot");
    expect(error).toMatchObject({ code: grpc.status.UNIMPLEMENTED, details: "emulator limit: no snapshots here" });
    await emulator.requests.idle();
    expect(emulator.requests.unserved()).toEqual([{ protocol: "grpc", method: "POST", target: "/echo.v1.Echo/Snapshot", reason: "refused", count: 1 }]);
  });

  it("a vendor's own answer for unknown paths replaces the kit's 404, and the call still counts as unserved", async () => {
    emulator = await runEmulator({
      name: "gin",
      description: "plain-text 404s",
      async start(kit) {
        const router = createRouter({ notFound: () => ({ status: 404, body: "404 page not found" }) });
        router.get("/known", () => ({ ok: true }));
        const http = await kit.http(router);
        return { url: http.url, credentials: {} };
      },
    });
    const answer = await fetch(`${emulator.url}/unknown`);
    expect(answer.status).toBe(404);
    expect(answer.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await answer.text()).toBe("404 page not found");
    expect((await fetch(`${emulator.url}/known`, { method: "POST" })).status).toBe(404);
    await emulator.requests.idle();
    expect(emulator.requests.unserved().map((u) => [u.target, u.reason])).toEqual([
      ["/unknown", "no route"],
      ["/known", "method not allowed"],
    ]);
  });
});
