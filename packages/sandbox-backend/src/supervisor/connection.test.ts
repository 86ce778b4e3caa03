// Stdin sent over one connection by callers that do not wait for each other (a terminal's
// keystrokes, written fire-and-forget by the emulators) while the supervisor reads slowly.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Connection } from "./connection.js";
import { FRAME_CONTROL, FRAME_STDIN, createFrameDecoder, parseControl } from "./protocol.js";

let dir: string;
let server: net.Server;
let accepted: Promise<net.Socket>;
let supervisorSide: net.Socket | undefined;
let socketPath: string;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "sbx-connection-"));
  socketPath = path.join(dir, "s");
  // A supervisor that reads nothing until told: the host's writes back up.
  accepted = new Promise((resolve) => {
    server = net.createServer((sock) => {
      sock.pause();
      supervisorSide = sock;
      resolve(sock);
    });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
});
afterEach(async () => {
  vi.restoreAllMocks();
  supervisorSide?.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The host side's socket of the next Connection, to watch its listeners. */
function captureHostSocket(): () => net.Socket {
  let sock: net.Socket | undefined;
  const connect = net.connect;
  vi.spyOn(net, "connect").mockImplementation(((...args: Parameters<typeof net.connect>) => {
    sock = connect(...args);
    return sock;
  }) as typeof net.connect);
  return () => sock as net.Socket;
}

describe("sendData from writers that do not wait for each other", () => {
  it("waits for 'drain' once for all of them, delivers each writer's bytes whole and in call order, stdin-end last", async () => {
    const hostSocket = captureHostSocket();
    const connection = new Connection({ socketPath }, { onControl: () => undefined, onEnd: () => undefined });
    const supervisor = await accepted;
    // Each over the 256 KiB frame size: one writer's frames could interleave with another's.
    const writes = Array.from({ length: 12 }, (_, i) => Buffer.alloc(600 * 1024, i + 1));
    const sent = writes.map((data) => connection.sendData(data));
    const stdinEnded = connection.sendAfterData({ op: "stdin-end" });
    await new Promise((resolve) => setImmediate(resolve));
    expect(hostSocket().listenerCount("drain")).toBe(1);

    const received: Buffer[] = [];
    let stdinEndAfter: number | undefined;
    const decode = createFrameDecoder((type, payload) => {
      if (type === FRAME_STDIN) received.push(payload);
      else if (type === FRAME_CONTROL && parseControl(payload).op === "stdin-end") stdinEndAfter = Buffer.concat(received).length;
    });
    supervisor.on("data", decode);
    supervisor.resume();
    await Promise.all([...sent, stdinEnded]);
    connection.end();
    await new Promise((resolve) => supervisor.once("end", resolve));
    expect(Buffer.concat(received).equals(Buffer.concat(writes))).toBe(true);
    expect(stdinEndAfter).toBe(Buffer.concat(writes).length);
    expect(hostSocket().listenerCount("drain")).toBe(0);
  });
});
