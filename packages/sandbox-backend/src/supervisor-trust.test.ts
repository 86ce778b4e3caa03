// The worker treats every byte from a jail as untrusted (host side): a
// supervisor that has been taken over answers the worker's connections itself. Here a fake one is
// put where the real one's socket was; its replies must end that sandbox's jail with a clear error,
// never the worker, and nothing it announces may be buffered.
import fs from "node:fs";
import net from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startWorld, type World } from "./__fixtures__/world.js";
import { FRAME_CONTROL, FRAME_STDOUT, encodeControl, encodeFrame } from "./supervisor/protocol.js";
import { sandboxLayout } from "./store/layout.js";
import type { Sandbox } from "./types.js";

let world: World;
const uncaught: unknown[] = [];
const onUncaught = (error: unknown) => uncaught.push(error);
const servers: net.Server[] = [];

beforeAll(() => {
  world = startWorld();
  process.on("uncaughtException", onUncaught);
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});
afterAll(async () => {
  process.off("uncaughtException", onUncaught);
  await world?.close();
});

/** Answers every connection to `sandbox` with `reply` once the request has arrived. */
async function impersonateSupervisor(sandbox: Sandbox, reply: (sock: net.Socket) => void): Promise<void> {
  const { socket } = sandboxLayout(world.stateDir, sandbox.id);
  // The real supervisor keeps its listening socket; only the name the worker connects to moves.
  fs.renameSync(socket, `${socket}.real`);
  const server = net.createServer((sock) => {
    sock.on("error", () => undefined);
    sock.once("data", () => reply(sock));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(socket, resolve));
}

async function stopped(sandbox: Sandbox): Promise<string> {
  const deadline = Date.now() + 10_000;
  while (sandbox.state === "running" && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  return sandbox.state;
}

describe("a supervisor that breaks the protocol", () => {
  it("a reply of an unknown frame type to a kill: the call fails, the jail is ended, the worker lives", async () => {
    const sandbox = await world.create({ id: "forged-kill" });
    await impersonateSupervisor(sandbox, (sock) => sock.end(Buffer.from([9, 0, 0, 0, 1, 0])));
    const abort = new AbortController();
    const run = sandbox.runner.run("sleep 30", { signal: abort.signal });
    abort.abort();
    // The command's own connection was answered with garbage too; either way nothing is thrown.
    await expect(run).rejects.toThrow(/bad reply from the supervisor/);
    expect(await stopped(sandbox)).toBe("stopped");
    await expect(sandbox.exec({ script: "true" })).rejects.toThrow(/was ended because its supervisor broke the protocol: bad reply from the supervisor: unexpected frame type 9/);
    expect(fs.readFileSync(sandbox.paths.log, "utf8")).toMatch(/ending the jail: bad reply from the supervisor/);
    expect(uncaught).toEqual([]);
  });

  it("a forged exit (exit code out of range) ends the jail instead of being reported as the command's result", async () => {
    const sandbox = await world.create({ id: "forged-exit" });
    await impersonateSupervisor(sandbox, (sock) => {
      sock.write(encodeControl({ op: "started", id: "x", pid: 77 }));
      sock.write(encodeFrame(FRAME_STDOUT, Buffer.from("FORGED")));
      sock.end(encodeControl({ op: "exit", id: "x", code: 1e9, signal: null }));
    });
    await expect(sandbox.runner.run("echo genuine; exit 3", {})).rejects.toThrow(/exit code 1000000000 is not null or an integer/);
    expect(await stopped(sandbox)).toBe("stopped");
    expect(uncaught).toEqual([]);
  });

  it("a STDOUT frame announcing 0xFFFFFFF0 bytes, then 256 MiB: refused from its header, nothing buffered", async () => {
    const sandbox = await world.create({ id: "forged-flood" });
    let sent = 0;
    await impersonateSupervisor(sandbox, (sock) => {
      const header = Buffer.from([FRAME_STDOUT, 0xff, 0xff, 0xff, 0xf0]);
      const chunk = Buffer.alloc(1024 * 1024, 0x41);
      sock.write(header);
      const pump = () => {
        while (sent < 256 * 1024 * 1024 && !sock.destroyed) {
          sent += chunk.length;
          if (!sock.write(chunk)) return void sock.once("drain", pump);
        }
        sock.end();
      };
      pump();
    });
    global.gc?.();
    const before = process.memoryUsage().rss;
    await expect(sandbox.runner.run("true", {})).rejects.toThrow(/data frame too large \(4294967280 bytes, cap 1048576\)/);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    // The worker closed the connection: the flood stopped far short of its 256 MiB.
    expect(sent).toBeLessThan(256 * 1024 * 1024);
    expect(await stopped(sandbox)).toBe("stopped");
    expect(uncaught).toEqual([]);
  });

  it("an unexpected message, a second reply, or output on a one-shot request, for exec handles and file ops too", async () => {
    const cases: Array<[string, Buffer, (sandbox: Sandbox) => Promise<unknown>, RegExp]> = [
      ["exec answered by a file reply", encodeControl({ op: "fs-done", result: {} }), (sandbox) => sandbox.exec({ script: "true" }), /unexpected reply "fs-done" to exec/],
      ["processes answered twice", Buffer.concat([encodeControl({ op: "processes", processes: [] }), encodeControl({ op: "processes", processes: [] })]), (sandbox) => sandbox.processes(), /./],
      [
        "stat answered with output",
        Buffer.concat([encodeFrame(FRAME_STDOUT, Buffer.from("x")), encodeControl({ op: "fs-done", result: {} })]),
        (sandbox) => sandbox.files.stat("/workspace"),
        /data frames in reply to a file stat/,
      ],
      ["a read answered by an oversized control frame", Buffer.from([FRAME_CONTROL, 0x00, 0x20, 0x00, 0x00]), (sandbox) => sandbox.files.read("/etc/hostname"), /control frame too large/],
    ];
    for (const [what, reply, call, message] of cases) {
      const sandbox = await world.create({ id: `forged-${cases.findIndex((entry) => entry[0] === what)}` });
      await impersonateSupervisor(sandbox, (sock) => sock.end(reply));
      const outcome = await call(sandbox).then(
        () => null,
        (error: Error) => error,
      );
      // A second reply fails after the first resolved the call: the jail is ended all the same.
      if (!what.includes("twice")) expect(outcome?.message, what).toMatch(message);
      expect(await stopped(sandbox), what).toBe("stopped");
      await world.backend.destroy(sandbox.id);
    }
    expect(uncaught).toEqual([]);
  });
});
