import grpc from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator, ECHO_PROTO_PATH } from "../example/echo.js";
import { createFaultInjector } from "../faults/injector.js";
import { createRequestRecorder } from "../recorder/recorder.js";
import { bearer, collectStream, echoGrpcClient, unary, type EchoGrpcClient } from "../__fixtures__/echo-clients.js";
import { startGrpcServer } from "./server.js";

let emulator: RunningEmulator | undefined;
let client: EchoGrpcClient | undefined;
afterEach(async () => {
  client?.close();
  client = undefined;
  await emulator?.close();
  emulator = undefined;
});

async function setUp(tls = false) {
  emulator = await runEmulator(echoEmulator, { options: { tls } });
  client = tls ? echoGrpcClient(emulator.endpoints.grpc!, grpc.credentials.createSsl(Buffer.from(emulator.caPem!))) : echoGrpcClient(emulator.endpoints.grpc!);
  return { client, md: () => bearer(emulator!.credentials.token!) };
}

describe("gRPC server over @grpc/grpc-js", () => {
  it("unary", async () => {
    const { client, md } = await setUp();
    await expect(unary(client, "Say", { text: "héllo" }, md())).resolves.toEqual({ text: "héllo", length: "5" });
  });

  it("server streaming", async () => {
    const { client, md } = await setUp();
    const result = await collectStream(client.Count!({ count: 3, interval_ms: 1 }, md()));
    expect(result.messages).toEqual([
      { tick: 1, event: "tick" },
      { tick: 2, event: "tick" },
      { tick: 3, event: "tick" },
      { exit_code: 0, event: "exit_code" },
    ]);
    expect(result.status?.code).toBe(grpc.status.OK);
  });

  it("client streaming, with a handler's status error", async () => {
    const { client, md } = await setUp();
    const sum = (values: string[]) =>
      new Promise((resolve, reject) => {
        const call = client.Sum!(md(), (error: Error | null, response: unknown) => (error ? reject(error) : resolve(response)));
        for (const value of values) call.write({ value });
        call.end();
      });
    await expect(sum(["1", "2", "9007199254740993"])).resolves.toEqual({ total: "9007199254740996", count: 3 });
    await expect(sum([])).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "Sum needs at least one value" });
    await emulator!.requests.idle();
    expect(emulator!.requests.list({ route: "/echo.v1.Echo/Sum" }).map((r) => [r.code, r.messagesIn])).toEqual([
      ["OK", 3],
      ["INVALID_ARGUMENT", 0],
    ]);
  });

  it("bidi streaming", async () => {
    const { client, md } = await setUp();
    const call = client.Chat!(md());
    const replies: string[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on("data", (message: { text: string }) => {
        replies.push(message.text);
        if (replies.length === 1) call.write({ text: "second" }); // answer before sending more: truly interleaved
        if (replies.length === 2) call.end();
      });
      call.on("status", () => resolve());
      call.on("error", reject);
    });
    call.write({ text: "first" });
    await done;
    expect(replies).toEqual(["FIRST", "SECOND"]);
  });

  it("checks metadata credentials: UNAUTHENTICATED without or with a wrong token", async () => {
    const { client } = await setUp();
    await expect(unary(client, "Say", { text: "x" }, new grpc.Metadata())).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: "missing credentials" });
    await expect(unary(client, "Say", { text: "x" }, bearer("wrong"))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED, details: "invalid credentials" });
  });

  it("honours the client's deadline: the handler's signal aborts", async () => {
    const { client, md } = await setUp();
    const result = await collectStream(client.Count!({ count: 100, interval_ms: 50 }, md(), { deadline: Date.now() + 200 }));
    expect(result.error?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(result.messages.length).toBeLessThan(10);
    await emulator!.requests.idle();
  });

  it("serves many calls at once without a listener-leak warning (one 'closing' listener per call in flight)", async () => {
    const { client, md } = await setUp();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    try {
      const calls = Array.from({ length: 12 }, () => collectStream(client.Count!({ count: 3, interval_ms: 20 }, md())));
      for (const result of await Promise.all(calls)) expect(result.status?.code).toBe(grpc.status.OK);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message)).toEqual([]);
  });

  it("serves TLS with the emulator's self-signed certificate", async () => {
    const { client, md } = await setUp(true);
    await expect(unary(client, "Say", { text: "secure" }, md())).resolves.toMatchObject({ text: "secure" });
  });

  it("refuses handlers for services or methods the proto does not have", async () => {
    const deps = { protoPath: ECHO_PROTO_PATH, recorder: createRequestRecorder(), faults: createFaultInjector() };
    await expect(startGrpcServer({ ...deps, services: { "echo.v1.Nope": {} } })).rejects.toThrow('grpc services: "echo.v1.Nope" is not a service in the proto (services: echo.v1.Echo)');
    await expect(startGrpcServer({ ...deps, services: { "echo.v1.Echo": { Shout: () => ({}) } } })).rejects.toThrow('grpc services.echo.v1.Echo: no method "Shout" in the proto');
  });

  it("answers UNIMPLEMENTED (recorded) for a proto method without a handler", async () => {
    const recorder = createRequestRecorder();
    const server = await startGrpcServer({ protoPath: ECHO_PROTO_PATH, recorder, faults: createFaultInjector(), services: { "echo.v1.Echo": {} } });
    client = echoGrpcClient(server.target);
    await expect(unary(client, "Say", { text: "x" }, new grpc.Metadata())).rejects.toMatchObject({ code: grpc.status.UNIMPLEMENTED });
    await recorder.idle();
    expect(recorder.list()[0]).toMatchObject({ route: "/echo.v1.Echo/Say", code: "UNIMPLEMENTED" });
    client.close();
    client = undefined;
    await server.close();
  });
});
