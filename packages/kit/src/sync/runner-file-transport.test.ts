import fsp from "node:fs/promises";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { text } from "node:stream/consumers";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { listTree, makeWorld, pseudoRandomBytes, type World } from "./__fixtures__/world.js";
import { runnerFileTransport } from "./runner-file-transport.js";

let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

describe("runnerFileTransport", () => {
  it("moves every byte both ways with the asked mode", async () => {
    const files = runnerFileTransport(() => w.runner);
    const bytes = pseudoRandomBytes(700_000);
    const target = path.join(w.root, "f.bin");
    await files.upload(target, Readable.from([bytes]), { mode: 0o600, size: bytes.length });
    expect((await fsp.stat(target)).mode & 0o777).toBe(0o600);
    const chunks: Buffer[] = [];
    for await (const chunk of await files.download(target)) chunks.push(chunk as Buffer);
    expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
  });

  it("a download of a missing file fails its stream", async () => {
    const files = runnerFileTransport(() => w.runner);
    await expect(text(await files.download(path.join(w.root, "missing")))).rejects.toThrow(/reading .*missing.* ended with 1/);
  });

  it("an upload ended mid-way leaves no partial file", async () => {
    const files = runnerFileTransport(() => w.runner);
    const source = new PassThrough();
    source.write(Buffer.alloc(64 * 1024, 1)); // then nothing more: the upload hangs until aborted
    const abort = new AbortController();
    const uploading = files.upload(path.join(w.root, "partial"), source, { signal: abort.signal });
    await new Promise((resolve) => setTimeout(resolve, 300));
    abort.abort();
    await expect(uploading).rejects.toThrow(/ended with/);
    expect(await listTree(w.root)).toEqual([]);
  });
});
