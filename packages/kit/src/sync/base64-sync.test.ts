import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { base64SyncIn, base64SyncOut } from "./index.js";
import { listTree, makeWorld, modeOf, pseudoRandomBytes, sha256, writeModesTree, type World } from "./__fixtures__/world.js";

let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

const MiB = 1024 * 1024;

describe("base64 fallback", () => {
  it("round-trips a multi-chunk file with bounded stdin per call and matching SHA-256", async () => {
    const size = 7 * MiB + 123; // three 3 MiB chunks
    const source = path.join(w.host, "big.bin");
    await fs.writeFile(source, pseudoRandomBytes(size, 3));
    await fs.chmod(source, 0o600);
    const target = path.join(w.root, "dir/big.bin");
    const result = await base64SyncIn(w.runner, [{ operationId: "in", files: [{ sourcePath: source, targetPath: target, kind: "file" }] }], {
      roots: [w.root],
    });
    expect(result.operations).toEqual([{ operationId: "in", filesTransferred: 1, bytesTransferred: size }]);
    expect(await sha256(target)).toBe(await sha256(source));
    expect(await modeOf(target)).toBe(0o600);
    expect(w.runner.maxStdinBytes).toBeLessThanOrEqual(4 * MiB + 16);
    // 3 chunks: the first also makes the stage, the last also installs
    expect(w.runner.scripts.length).toBe(3);

    w.runner.scripts.length = 0;
    const back = path.join(w.host, "big.back");
    const out = await base64SyncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "file" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(out.operations[0]?.bytesTransferred).toBe(size);
    expect(await sha256(back)).toBe(await sha256(source));
    expect(await modeOf(back)).toBe(0o600);
    // pack + ceil(archive / 3 MiB) reads (the last removes the stage)
    expect(w.runner.scripts.length).toBe(1 + 3);
    expect(await listTree(w.sandboxTmp)).toEqual([]);
    expect(await listTree(w.scratch)).toEqual([]);
  });

  it("moves a small file with its post-upload command in ONE call, and a small tree back in ONE call", async () => {
    const source = path.join(w.host, "small.txt");
    await fs.writeFile(source, "small\n");
    const target = path.join(w.root, "small.txt");
    await base64SyncIn(w.runner, [{ operationId: "in", files: [{ sourcePath: source, targetPath: target, kind: "file" }], postUploadCommands: [{ command: `cp '${target}' '${target}.copy'` }] }], {
      roots: [w.root],
    });
    expect(w.runner.scripts.length).toBe(1);
    expect(await fs.readFile(`${target}.copy`, "utf8")).toBe("small\n");
    w.runner.scripts.length = 0;
    const back = path.join(w.host, "back");
    await base64SyncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: w.root, targetPath: back, kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect(w.runner.scripts.length).toBe(1);
    expect(await fs.readFile(path.join(back, "small.txt.copy"), "utf8")).toBe("small\n");
    expect(await listTree(w.sandboxTmp)).toEqual([]);
  });

  it("round-trips a directory in many small chunks, with modes, symlinks and excludes", async () => {
    const tree = await writeModesTree(w, pseudoRandomBytes(100_000, 5));
    const target = path.join(w.root, "tree");
    const opts = { roots: [w.root], hostScratchDir: w.scratch, chunkBytes: 16 * 1024 };
    const mapping = { sourcePath: tree, targetPath: target, kind: "directory" as const, exclude: ["*.log"] };
    const result = await base64SyncIn(w.runner, [{ operationId: "in", files: [mapping] }], opts);
    expect(result.operations[0]).toMatchObject({ filesTransferred: 2, bytesTransferred: 100_001 });
    expect(await listTree(target)).toEqual(["bin", "bin/run", "key", "link"]);
    expect(await modeOf(path.join(target, "key"))).toBe(0o600);
    expect(await modeOf(path.join(target, "bin/run"))).toBe(0o755);
    expect(await fs.readlink(path.join(target, "link"))).toBe("bin/run");
    expect(w.runner.maxStdinBytes).toBeLessThanOrEqual(Math.ceil((16 * 1024) / 3) * 4);

    await fs.writeFile(path.join(target, "again.log"), "l");
    const back = path.join(w.host, "back");
    await base64SyncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory", exclude: ["*.log"] }] }], opts);
    expect(await listTree(back)).toEqual(["bin", "bin/run", "key", "link"]);
    expect(await sha256(path.join(back, "bin/run"))).toBe(await sha256(path.join(tree, "bin/run")));
    expect(await modeOf(path.join(back, "key"))).toBe(0o600);
    expect(await listTree(w.root)).not.toContainEqual(expect.stringContaining(".paperclip-upload."));
    expect(await listTree(w.sandboxTmp)).toEqual([]);
  });

  it("refuses an archive over maxOutboundBytes before reading it, and cleans the sandbox stage", async () => {
    await fs.writeFile(path.join(w.root, "big"), pseudoRandomBytes(MiB));
    await expect(
      base64SyncOut(w.runner, [{ operationId: "big", files: [{ sourcePath: path.join(w.root, "big"), targetPath: path.join(w.host, "big"), kind: "file" }] }], {
        roots: [w.root],
        hostScratchDir: w.scratch,
        maxOutboundBytes: 64 * 1024,
      }),
    ).rejects.toMatchObject({ code: "SYNC_TOO_LARGE" });
    expect(await listTree(w.sandboxTmp)).toEqual([]);
    expect(await listTree(w.scratch)).toEqual([]);
  });

  it("confines paths exactly like the streaming sync (planted symlink refused)", async () => {
    await fs.symlink(w.outside, path.join(w.root, "escape"));
    await fs.writeFile(path.join(w.host, "f"), "x");
    await expect(
      base64SyncIn(w.runner, [{ operationId: "x", files: [{ sourcePath: path.join(w.host, "f"), targetPath: path.join(w.root, "escape/f"), kind: "file" }] }], {
        roots: [w.root],
      }),
    ).rejects.toMatchObject({ code: "SYNC_PATH_OUTSIDE_ROOT" });
    expect(await listTree(w.outside)).toEqual([]);
  });

  it("removes the sandbox stage when a chunk fails", async () => {
    await fs.writeFile(path.join(w.host, "f"), pseudoRandomBytes(100_000));
    const failing = {
      capabilities: w.runner.capabilities,
      calls: 0,
      run: (script: string, io: Parameters<typeof w.runner.run>[1]) => {
        failing.calls += 1;
        // the second call is the first chunk: make it fail
        return failing.calls === 2 ? w.runner.run("exit 7", io) : w.runner.run(script, io);
      },
    };
    await expect(
      base64SyncIn(failing, [{ operationId: "x", files: [{ sourcePath: path.join(w.host, "f"), targetPath: path.join(w.root, "f"), kind: "file" }] }], {
        roots: [w.root],
        chunkBytes: 32 * 1024,
      }),
    ).rejects.toMatchObject({ code: "SYNC_REMOTE_FAILED", exitCode: 7 });
    expect(await listTree(w.root)).toEqual([]);
  });
});
