// Whatever a jail sends back, a malformed reply only fails that command (or file op) with an error:
// it never throws into the worker's event loop, and buffers stay bounded.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SupervisorClient } from "./client.js";
import { request, SupervisorTransportError } from "./connection.js";
import { attachExec, readOutput, startExec, subscribeOutput } from "./exec-client.js";
import { createFilesClient } from "./files-client.js";
import { FRAME_CONTROL, FRAME_STDOUT, encodeControl, encodeFrame } from "./protocol.js";

let dir: string;
let server: net.Server | undefined;
const uncaught: unknown[] = [];
const onUncaught = (error: unknown) => uncaught.push(error);

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-malformed-"));
  process.on("uncaughtException", onUncaught);
});
afterEach(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});
afterAll(() => {
  process.off("uncaughtException", onUncaught);
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A fake supervisor that answers every connection's first bytes with `reply`. */
async function fakeSupervisor(reply: Buffer | ((sock: net.Socket) => void)): Promise<string> {
  const socketPath = path.join(dir, `s${Math.random().toString(36).slice(2, 8)}`);
  server = net.createServer((sock) => {
    sock.on("error", () => undefined);
    sock.once("data", () => (typeof reply === "function" ? reply(sock) : sock.end(reply)));
  });
  await new Promise<void>((resolve) => server!.listen(socketPath, resolve));
  return socketPath;
}

const BAD_REPLIES: Array<[string, Buffer]> = [
  ["an unknown frame type", Buffer.from([9, 0, 0, 0, 1, 0])],
  ["a control frame that is not JSON", encodeFrame(FRAME_CONTROL, Buffer.from("{nope"))],
  ["a control frame that is JSON but no object", encodeFrame(FRAME_CONTROL, Buffer.from("null"))],
  ["a control frame without an op", encodeFrame(FRAME_CONTROL, Buffer.from('{"pid":1}'))],
  ["a data frame announcing 4 GiB", Buffer.from([FRAME_STDOUT, 0xff, 0xff, 0xff, 0xff])],
  ["a control frame announcing 4 GiB", Buffer.from([FRAME_CONTROL, 0xff, 0xff, 0xff, 0xff])],
];

describe("malformed supervisor replies", () => {
  for (const [what, reply] of BAD_REPLIES) {
    it(`${what}: every client call rejects, nothing is thrown into the worker`, async () => {
      const socketPath = await fakeSupervisor(reply);
      const channel = { socketPath };
      await expect(request(channel, { op: "ping" }, ["pong"], 2_000)).rejects.toBeInstanceOf(Error);
      await expect(new SupervisorClient(channel).run("true", {})).rejects.toBeInstanceOf(SupervisorTransportError);
      await expect(startExec(channel, { script: "true" })).rejects.toBeInstanceOf(Error);
      await expect(attachExec(channel, 7)).rejects.toBeInstanceOf(Error);
      await expect(readOutput(channel, 7, "stdout", 0, 1024)).rejects.toBeInstanceOf(Error);
      await expect(subscribeOutput(channel, 7, { stdout: 0 }, { onData: () => undefined }).done).rejects.toBeInstanceOf(Error);
      const files = createFilesClient(channel, () => undefined);
      await expect(files.read("/x")).rejects.toBeInstanceOf(Error);
      await expect(files.write("/x", "data")).rejects.toBeInstanceOf(Error);
      await expect(files.list("/")).rejects.toBeInstanceOf(Error);
      expect(uncaught).toEqual([]);
    });
  }

  it("a read answered with more bytes than asked is refused at the bound", async () => {
    const socketPath = await fakeSupervisor(Buffer.concat([encodeFrame(FRAME_STDOUT, Buffer.alloc(4096, 1)), encodeControl({ op: "read-done", start: 0 })]));
    await expect(readOutput({ socketPath }, 7, "stdout", 0, 1024)).rejects.toThrow(/more output than asked/);
  });

  it("a file read larger than maxBytes is refused at the bound", async () => {
    const socketPath = await fakeSupervisor((sock) => {
      for (let i = 0; i < 8; i += 1) sock.write(encodeFrame(FRAME_STDOUT, Buffer.alloc(64 * 1024)));
      sock.end(encodeControl({ op: "fs-done", result: { size: 8 * 64 * 1024 } }));
    });
    await expect(createFilesClient({ socketPath }, () => undefined).read("/big", { maxBytes: 100_000 })).rejects.toMatchObject({ code: "EFBIG" });
  });
});
