// A command's output reaches the runner's sinks whole, with its exit after it, however long a slow
// sink holds the stream back: back-pressure pauses the command's pipes in the supervisor, and its
// exit is reported only once they are read to the end.
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "./types.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Sandbox;
beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "runner-output" });
});
afterAll(async () => {
  await world?.close();
});

/** A sink that takes its first chunk only after `stallMs`, and then everything at once. */
function stallingSink(stallMs: number) {
  const chunks: Buffer[] = [];
  let first = true;
  const sink = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      if (!first) return callback();
      first = false;
      setTimeout(callback, stallMs);
    },
  });
  return { sink, bytes: () => Buffer.concat(chunks) };
}

describe("runner output", () => {
  it("reports the exit after the last output, when a slow sink held the stream back past the command's exit", async () => {
    // Sizes around what the supervisor's connection takes while the sink stalls (its socket
    // buffers, a few hundred KiB): past it the supervisor pauses the command's pipes, and below
    // what the command can leave in them it has written everything (and the stderr line after it)
    // and exited while they are paused.
    for (const size of [384, 448, 512, 576, 640].map((kib) => kib * 1024)) {
      const { sink, bytes } = stallingSink(600);
      const stderr: Buffer[] = [];
      const exit = await sandbox.runner.run(`head -c ${size} /dev/zero | tr '\\0' x; echo last >&2`, { stdout: sink, stderr: (chunk) => stderr.push(chunk) });
      expect({ size, exit, stderr: Buffer.concat(stderr).toString(), stdout: bytes().length }).toMatchObject({
        size,
        exit: { exitCode: 0, signal: null, reason: "exit" },
        stderr: "last\n",
        stdout: size,
      });
    }
  });
});

describe("runner output, a background writer", () => {
  it("reports the exit although a background child keeps writing to the command's pipes without end", async () => {
    let bytes = 0;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        callback();
      },
    });
    // `yes` keeps the pipes busy (and full) long after the command's own exit.
    const exit = await sandbox.runner.run("yes & echo started; exit 3", { stdout: sink, timeoutMs: 60_000 });
    expect(exit).toMatchObject({ exitCode: 3, reason: "exit" });
    expect(bytes).toBeGreaterThan(0);
    await sandbox.runner.run("pkill -x yes; exit 0", {});
  });
});
