// Retries are not multiplied: the SDK retries connection failures itself (connect-phase for every
// request, resets for GET/PUT/DELETE), the client retries the rest once.
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDaytonaClient } from "./client.js";
import { daytonaConfig } from "./config.js";

let server: Server;
let connections = 0;
const sockets = new Set<Socket>();
beforeAll(async () => {
  // Accepts, reads the request, then resets the connection: every attempt is one connection.
  server = createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.once("data", () => socket.resetAndDestroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});
afterAll(() => {
  for (const socket of sockets) socket.destroy();
  server.close();
});

const client = () => {
  const port = (server.address() as { port: number }).port;
  return createDaytonaClient(daytonaConfig.parse({ apiKey: "dtn_secret_key_for_this_test", apiUrl: `http://127.0.0.1:${port}/api` }), { env: {} });
};

describe("attempts per call", () => {
  it("a GET reset mid-request: the SDK's 3 attempts, none more", async () => {
    connections = 0;
    const c = client();
    const error = (await c.call("getSandbox", () => c.sdk.get("some-id"), { idempotent: true, safeMethod: true }).catch((e: unknown) => e)) as Error;
    expect(error).toMatchObject({ code: "connection_reset", status: 0 });
    expect(error.message).not.toContain("dtn_secret_key_for_this_test");
    expect(connections).toBe(3);
  });

  it("a POST reset mid-request: the SDK does not repeat it, the client does once when the call is idempotent", async () => {
    connections = 0;
    const c = client();
    const sandbox = { id: "x" };
    await expect(c.call("startSandbox", () => c.sdk.create({}, { timeout: 5 }).then(() => sandbox), { idempotent: true })).rejects.toMatchObject({ code: "connection_reset", attempts: 2 });
    expect(connections).toBe(2);
    connections = 0;
    await expect(c.call("executeCommand", () => c.sdk.create({}, { timeout: 5 }), { idempotent: false })).rejects.toMatchObject({ code: "connection_reset" });
    expect(connections).toBe(1);
  });
});
