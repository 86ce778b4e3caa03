import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { base64SyncIn, base64SyncOut, syncIn, syncOut } from "./index.js";
import { makeWorld, pseudoRandomBytes, type World } from "./__fixtures__/world.js";

/**
 * Throughput through the local runner: a 100 MiB tree of 10,000 files, in and out, streaming and
 * base64. Opt-in (SYNC_BENCH=1) because it is slow on a shared machine; prints MiB/s.
 */
const FILES = 10_000;
const FILE_BYTES = 10 * 1024 + 486; // 10,000 files ≈ 100 MiB

describe.skipIf(process.env.SYNC_BENCH !== "1")("sync throughput (SYNC_BENCH=1)", () => {
  let w: World;
  let tree: string;
  const totalMiB = (FILES * FILE_BYTES) / 1024 / 1024;
  beforeAll(async () => {
    w = await makeWorld();
    tree = path.join(w.host, "tree");
    const content = pseudoRandomBytes(FILE_BYTES, 11);
    for (let d = 0; d < 100; d++) {
      const dir = path.join(tree, `d${d}`);
      await fs.mkdir(dir, { recursive: true });
      await Promise.all(Array.from({ length: FILES / 100 }, (_, f) => fs.writeFile(path.join(dir, `f${f}`), content)));
    }
  }, 120_000);
  afterAll(async () => {
    await w.cleanup();
  });

  const time = async (label: string, fn: () => Promise<{ operations: { filesTransferred: number }[] }>) => {
    const started = performance.now();
    const result = await fn();
    const seconds = (performance.now() - started) / 1000;
    console.log(`${label}: ${totalMiB.toFixed(1)} MiB, ${FILES} files in ${seconds.toFixed(2)} s = ${(totalMiB / seconds).toFixed(1)} MiB/s`);
    expect(result.operations[0]?.filesTransferred).toBe(FILES);
  };

  it("streaming and base64, in and out", async () => {
    const roots = [w.root];
    const target = path.join(w.root, "tree");
    const mapIn = [{ operationId: "in", files: [{ sourcePath: tree, targetPath: target, kind: "directory" as const }] }];
    const mapOut = (name: string) => [{ operationId: "out", files: [{ sourcePath: target, targetPath: path.join(w.host, name), kind: "directory" as const }] }];
    await time("syncIn (stream)", () => syncIn(w.runner, mapIn, { roots }));
    await time("syncOut (stream)", () => syncOut(w.runner, mapOut("out1"), { roots, hostScratchDir: w.scratch }));
    await time("base64SyncIn", () => base64SyncIn(w.runner, mapIn, { roots, hostScratchDir: w.scratch }));
    await time("base64SyncOut", () => base64SyncOut(w.runner, mapOut("out2"), { roots, hostScratchDir: w.scratch }));
  }, 600_000);
});
