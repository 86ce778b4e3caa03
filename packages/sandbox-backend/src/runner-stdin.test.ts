// The runner's stdin reaches the command whole whatever chunk sizes the caller's stream hands over:
// the supervisor refuses a data frame over 1 MiB, so the client splits every chunk.
import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "./types.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Sandbox;
beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "runner-stdin" });
});
afterAll(async () => {
  await world?.close();
});

describe("runner stdin", () => {
  it("delivers a stream whose chunks are larger than a frame (3 MiB and 5 MiB chunks), byte for byte", async () => {
    const chunks = [randomBytes(3 * 1024 * 1024), randomBytes(5 * 1024 * 1024 + 17)];
    const expected = createHash("sha256").update(Buffer.concat(chunks)).digest("hex");
    const out: Buffer[] = [];
    const exit = await sandbox.runner.run("sha256sum | cut -d' ' -f1", { stdin: Readable.from(chunks), stdout: (chunk) => out.push(chunk) });
    expect(exit).toMatchObject({ exitCode: 0, signal: null });
    expect(Buffer.concat(out).toString().trim()).toBe(expected);
  });
});
