// Backpressure on a supervisor connection, both ways: stdin sent by callers that do not wait for
// each other (a terminal's keystrokes, written fire-and-forget by the emulators) while the
// supervisor reads slowly, and a command's output delivered to a host sink that is slow.
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { SupervisorClient } from "./client.js";
import { Connection } from "./connection.js";
import { FRAME_CONTROL, FRAME_STDIN, FRAME_STDOUT, createFrameDecoder, encodeControl, encodeFrame, parseControl } from "./protocol.js";

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

describe("a command's output to a slow host sink", () => {
  it("waits for the sink's 'drain' once, however many frames one read of the socket held", async () => {
    const held: (() => void)[] = [];
    const sink = new Writable({
      highWaterMark: 1,
      write(chunk, _encoding, callback) {
        received.push(chunk as Buffer);
        held.push(callback);
      },
    });
    const received: Buffer[] = [];
    const lines = Array.from({ length: 40 }, (_, i) => Buffer.from(`line ${i}\n`));
    const run = new SupervisorClient({ socketPath }).run("true", { stdout: sink });
    run.catch(() => undefined); // awaited below; a failed check before must not leave it unhandled
    const supervisor = await accepted;
    supervisor.resume();
    // Forty small frames in one write: the host reads them in one chunk, the sink full after the first.
    supervisor.write(Buffer.concat(lines.map((line) => encodeFrame(FRAME_STDOUT, line))));
    await vi.waitFor(() => expect(received.length).toBeGreaterThan(0));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sink.listenerCount("drain")).toBeLessThanOrEqual(1);

    // The sink catches up; the command exits.
    const release = setInterval(() => held.shift()?.(), 1);
    await vi.waitFor(() => expect(Buffer.concat(received).equals(Buffer.concat(lines))).toBe(true));
    supervisor.end(encodeControl({ op: "exit", code: 0 }));
    expect(await run).toMatchObject({ exitCode: 0, reason: "exit" });
    clearInterval(release);
  });
});
