import fs from "node:fs/promises";
import path from "node:path";
import type { PluginSyncFileMapping } from "@paperclipai/plugin-sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { STREAM_TRANSPORT, type ScriptRunner } from "../transport.js";
import { SyncError, syncIn, syncOut } from "./index.js";
import { listTree, makeWorld, modeOf, pseudoRandomBytes, sha256, type World } from "./__fixtures__/world.js";

let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

const opts = () => ({ roots: [w.root], hostScratchDir: w.scratch });
const inOp = (...files: PluginSyncFileMapping[]) => [{ operationId: "op-in", files }];
const outOp = (...files: PluginSyncFileMapping[]) => [{ operationId: "op-out", files }];

async function writeHost(rel: string, content: string | Buffer, mode?: number): Promise<string> {
  const file = path.join(w.host, rel);
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, content);
  if (mode !== undefined) await fs.chmod(file, mode);
  return file;
}

async function stagesLeft(dir: string): Promise<string[]> {
  return (await listTree(dir)).filter((p) => p.split("/").some((part) => part.startsWith(".paperclip-upload.")));
}

describe("file mappings", () => {
  it("round-trips a file, creating missing sandbox directories, and reports counts", async () => {
    const source = await writeHost("notes.txt", "hello sandbox\n");
    const inResult = await syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "a/b/notes.txt"), kind: "file" }), opts());
    expect(inResult).toEqual({ operations: [{ operationId: "op-in", filesTransferred: 1, bytesTransferred: 14 }] });
    expect(await fs.readFile(path.join(w.root, "a/b/notes.txt"), "utf8")).toBe("hello sandbox\n");

    const back = path.join(w.host, "back/notes.txt");
    const outResult = await syncOut(w.runner, outOp({ sourcePath: path.join(w.root, "a/b/notes.txt"), targetPath: back, kind: "file" }), opts());
    expect(outResult).toEqual({ operations: [{ operationId: "op-out", filesTransferred: 1, bytesTransferred: 14 }] });
    expect(await fs.readFile(back, "utf8")).toBe("hello sandbox\n");
  });

  it("moves a 5 MiB file in and out with a matching SHA-256", async () => {
    const source = await writeHost("big.bin", pseudoRandomBytes(5 * 1024 * 1024, 7));
    const target = path.join(w.root, "big.bin");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: target, kind: "file" }), opts());
    expect(await sha256(target)).toBe(await sha256(source));
    const back = path.join(w.host, "big.back");
    const result = await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "file" }), opts());
    expect(await sha256(back)).toBe(await sha256(source));
    expect(result.operations[0]?.bytesTransferred).toBe(5 * 1024 * 1024);
  });

  it("moves an empty file", async () => {
    const source = await writeHost("empty", "");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "empty"), kind: "file" }), opts());
    expect((await fs.stat(path.join(w.root, "empty"))).size).toBe(0);
  });

  it("lands a 0600 file as 0600 on both sides", async () => {
    const source = await writeHost("secret", "token", 0o600);
    const target = path.join(w.root, "secret");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: target, kind: "file" }), opts());
    expect(await modeOf(target)).toBe(0o600);
    const back = path.join(w.host, "secret.back");
    await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "file" }), opts());
    expect(await modeOf(back)).toBe(0o600);
  });

  it("applies mapping.mode over the source mode, in both directions", async () => {
    const source = await writeHost("script.sh", "#!/bin/sh\n", 0o644);
    const target = path.join(w.root, "script.sh");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: target, kind: "file", mode: 0o700 }), opts());
    expect(await modeOf(target)).toBe(0o700);
    const back = path.join(w.host, "script.back");
    await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "file", mode: 0o640 }), opts());
    expect(await modeOf(back)).toBe(0o640);
  });

  it("replaces a planted symlink at the target instead of writing through it", async () => {
    const victim = path.join(w.outside, "victim");
    await fs.writeFile(victim, "original");
    await fs.symlink(victim, path.join(w.root, "config.json"));
    const source = await writeHost("config.json", "{}");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "config.json"), kind: "file" }), opts());
    expect(await fs.readFile(victim, "utf8")).toBe("original");
    expect((await fs.lstat(path.join(w.root, "config.json"))).isFile()).toBe(true);
  });

  it("refuses to replace a directory with a file", async () => {
    await fs.mkdir(path.join(w.root, "taken"));
    const source = await writeHost("f", "x");
    await expect(syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "taken"), kind: "file" }), opts())).rejects.toMatchObject({
      code: "SYNC_TARGET_INVALID",
    });
    expect(await stagesLeft(w.root)).toEqual([]);
  });

  it("reads a symlinked sandbox file only when its target is inside a root", async () => {
    await fs.writeFile(path.join(w.root, "real.txt"), "inside");
    await fs.symlink("real.txt", path.join(w.root, "alias.txt"));
    await fs.writeFile(path.join(w.outside, "secret"), "outside");
    await fs.symlink(path.join(w.outside, "secret"), path.join(w.root, "leak.txt"));
    const back = path.join(w.host, "alias.back");
    await syncOut(w.runner, outOp({ sourcePath: path.join(w.root, "alias.txt"), targetPath: back, kind: "file" }), opts());
    expect(await fs.readFile(back, "utf8")).toBe("inside");
    await expect(syncOut(w.runner, outOp({ sourcePath: path.join(w.root, "leak.txt"), targetPath: path.join(w.host, "leak"), kind: "file" }), opts())).rejects.toMatchObject({
      code: "SYNC_PATH_OUTSIDE_ROOT",
    });
    await expect(fs.access(path.join(w.host, "leak"))).rejects.toThrow();
  });
});

describe("directory mappings", () => {
  async function makeTree(): Promise<string> {
    await writeHost("tree/bin/run", "#!/bin/sh\necho hi\n", 0o755);
    await writeHost("tree/secret/key", "k", 0o600);
    await writeHost("tree/docs/readme.md", "# hi\n", 0o644);
    await writeHost("tree/docs/open", "o", 0o666);
    await fs.chmod(path.join(w.host, "tree/secret"), 0o700);
    await fs.symlink("../docs/readme.md", path.join(w.host, "tree/bin/readme-link"));
    return path.join(w.host, "tree");
  }

  it("round-trips a tree keeping every member's mode and its symlinks", async () => {
    const tree = await makeTree();
    const target = path.join(w.root, "work/tree");
    const inResult = await syncIn(w.runner, inOp({ sourcePath: tree, targetPath: target, kind: "directory" }), opts());
    expect(inResult.operations[0]).toMatchObject({ filesTransferred: 4, bytesTransferred: 18 + 1 + 5 + 1 });
    expect(await modeOf(path.join(target, "bin/run"))).toBe(0o755);
    expect(await modeOf(path.join(target, "secret/key"))).toBe(0o600);
    expect(await modeOf(path.join(target, "secret"))).toBe(0o700);
    expect(await modeOf(path.join(target, "docs/open"))).toBe(0o666);
    expect(await fs.readlink(path.join(target, "bin/readme-link"))).toBe("../docs/readme.md");

    const back = path.join(w.host, "tree.back");
    const outResult = await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "directory" }), opts());
    expect(outResult.operations[0]).toMatchObject({ filesTransferred: 4, bytesTransferred: 25 });
    expect(await modeOf(path.join(back, "bin/run"))).toBe(0o755);
    expect(await modeOf(path.join(back, "secret/key"))).toBe(0o600);
    expect(await modeOf(path.join(back, "secret"))).toBe(0o700);
    expect(await modeOf(path.join(back, "docs/open"))).toBe(0o666);
    expect(await fs.readlink(path.join(back, "bin/readme-link"))).toBe("../docs/readme.md");
    expect(await listTree(back)).toEqual(await listTree(tree));
  });

  it("dereferences symlinks with followSymlinks, in both directions", async () => {
    const tree = await makeTree();
    const target = path.join(w.root, "tree");
    await syncIn(w.runner, inOp({ sourcePath: tree, targetPath: target, kind: "directory", followSymlinks: true }), opts());
    const inLink = await fs.lstat(path.join(target, "bin/readme-link"));
    expect(inLink.isFile()).toBe(true);

    await fs.symlink("docs/readme.md", path.join(target, "top-link"));
    const back = path.join(w.host, "followed");
    await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "directory", followSymlinks: true }), opts());
    expect((await fs.lstat(path.join(back, "top-link"))).isFile()).toBe(true);
    expect(await fs.readFile(path.join(back, "top-link"), "utf8")).toBe("# hi\n");
  });

  it("honours exclude globs (basename, relative path, ** and ?) in both directions", async () => {
    await writeHost("src/app.ts", "a");
    await writeHost("src/app.log", "log");
    await writeHost("src/node_modules/dep/index.js", "dep");
    await writeHost("src/build/out/x.js", "x");
    await writeHost("src/keep/build.txt", "keep");
    await writeHost("src/a1.tmp", "t");
    await writeHost("src/deep/er/file.snap", "s");
    const exclude = ["*.log", "node_modules", "build/**", "a?.tmp", "**/*.snap"];
    const target = path.join(w.root, "src");
    const result = await syncIn(w.runner, inOp({ sourcePath: path.join(w.host, "src"), targetPath: target, kind: "directory", exclude }), opts());
    const expected = ["app.ts", "build", "deep", "deep/er", "keep", "keep/build.txt"];
    expect(await listTree(target)).toEqual(expected);
    expect(result.operations[0]).toMatchObject({ filesTransferred: 2 });

    // put excluded things back on the sandbox side and sync out with the same excludes
    await fs.mkdir(path.join(target, "node_modules/x"), { recursive: true });
    await fs.writeFile(path.join(target, "node_modules/x/i.js"), "i");
    await fs.writeFile(path.join(target, "debug.log"), "l");
    await fs.writeFile(path.join(target, "deep/er/b.snap"), "s");
    const back = path.join(w.host, "src.back");
    await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "directory", exclude }), opts());
    expect(await listTree(back)).toEqual(expected);
  });

  it("replaces the target directory (destroy-then-replace) and cleans its stage", async () => {
    const tree = await makeTree();
    const target = path.join(w.root, "tree");
    await fs.mkdir(target);
    await fs.writeFile(path.join(target, "stale"), "old");
    await syncIn(w.runner, inOp({ sourcePath: tree, targetPath: target, kind: "directory" }), opts());
    await expect(fs.access(path.join(target, "stale"))).rejects.toThrow();
    expect(await stagesLeft(w.root)).toEqual([]);

    const back = path.join(w.host, "back");
    await fs.mkdir(back);
    await fs.writeFile(path.join(back, "stale"), "old");
    await syncOut(w.runner, outOp({ sourcePath: target, targetPath: back, kind: "directory" }), opts());
    await expect(fs.access(path.join(back, "stale"))).rejects.toThrow();
    expect(await stagesLeft(w.host)).toEqual([]);
  });

  it("leaves the target untouched when the host cannot pack the whole tree", async () => {
    await writeHost("broken/a.txt", "a");
    await fs.symlink("does-not-exist", path.join(w.host, "broken/dangling"));
    const target = path.join(w.root, "broken");
    await fs.mkdir(target);
    await fs.writeFile(path.join(target, "precious"), "keep me");
    await expect(syncIn(w.runner, inOp({ sourcePath: path.join(w.host, "broken"), targetPath: target, kind: "directory", followSymlinks: true }), opts())).rejects.toMatchObject({
      code: "SYNC_SOURCE_INVALID",
      operationId: "op-in",
    });
    expect(await fs.readFile(path.join(target, "precious"), "utf8")).toBe("keep me");
    expect(await stagesLeft(w.root)).toEqual([]);
  });
});

describe("stages of scripts that died without their trap (SIGKILL after the grace ran out)", () => {
  // The sandbox side removes its stage in an EXIT trap; a SIGKILL skips it. This runner stands in
  // for that: the trap is disarmed and the script fails right after making its stage.
  const killedAfterStage: ScriptRunner = {
    capabilities: STREAM_TRANSPORT,
    run: (script, io) => w.runner.run(script.replace(/trap 'rm -rf "\$pc_stage"' EXIT/g, ":").replace(/(mkdir -m 700 "\$pc_stage" \|\| pc_refuse SYNC_REMOTE_FAILED\n)/, "$1exit 137\n"), io),
  };

  it("removes a file upload's stage from the host side", async () => {
    const source = await writeHost("f.txt", "x");
    await expect(syncIn(killedAfterStage, inOp({ sourcePath: source, targetPath: path.join(w.root, "dir/f.txt"), kind: "file" }), opts())).rejects.toMatchObject({ code: "SYNC_REMOTE_FAILED" });
    expect(await stagesLeft(w.root)).toEqual([]);
  });

  it("removes a directory upload's stage from the host side", async () => {
    await writeHost("tree/a.txt", "a");
    await expect(syncIn(killedAfterStage, inOp({ sourcePath: path.join(w.host, "tree"), targetPath: path.join(w.root, "tree"), kind: "directory" }), opts())).rejects.toMatchObject({
      code: "SYNC_REMOTE_FAILED",
    });
    expect(await stagesLeft(w.root)).toEqual([]);
  });
});

describe("confinement of sandbox paths", () => {
  it("refuses paths outside the roots or not normalized before running anything", async () => {
    const source = await writeHost("f", "x");
    const cases: [string, string][] = [
      [path.join(w.outside, "f"), "SYNC_PATH_OUTSIDE_ROOT"],
      [`${w.root}/../outside/f`, "SYNC_PATH_INVALID"],
      [`${w.root}//f`, "SYNC_PATH_INVALID"],
      ["relative/f", "SYNC_PATH_INVALID"],
      [`${w.root}-sibling/f`, "SYNC_PATH_OUTSIDE_ROOT"],
      [w.root, "SYNC_TARGET_INVALID"],
    ];
    for (const [targetPath, code] of cases) {
      await expect(syncIn(w.runner, inOp({ sourcePath: source, targetPath, kind: "file" }), opts())).rejects.toMatchObject({ code });
    }
    await expect(syncOut(w.runner, outOp({ sourcePath: "/etc", targetPath: path.join(w.host, "etc"), kind: "directory" }), opts())).rejects.toMatchObject({
      code: "SYNC_PATH_OUTSIDE_ROOT",
    });
    expect(w.runner.scripts).toEqual([]);
    expect(await listTree(w.outside)).toEqual([]);
  });

  it("refuses a path that a planted symlink would lead outside, creating nothing there", async () => {
    await fs.symlink(w.outside, path.join(w.root, "escape"));
    const source = await writeHost("f", "x");
    await expect(syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "escape/new/dir/f"), kind: "file" }), opts())).rejects.toMatchObject({ code: "SYNC_PATH_OUTSIDE_ROOT" });
    await expect(syncIn(w.runner, inOp({ sourcePath: w.host, targetPath: path.join(w.root, "escape/tree"), kind: "directory" }), opts())).rejects.toMatchObject({ code: "SYNC_PATH_OUTSIDE_ROOT" });
    expect(await listTree(w.outside)).toEqual([]);

    await fs.writeFile(path.join(w.outside, "secret"), "s");
    await expect(syncOut(w.runner, outOp({ sourcePath: path.join(w.root, "escape"), targetPath: path.join(w.host, "x"), kind: "directory" }), opts())).rejects.toMatchObject({
      code: "SYNC_PATH_OUTSIDE_ROOT",
    });
    await expect(syncOut(w.runner, outOp({ sourcePath: path.join(w.root, "escape/secret"), targetPath: path.join(w.host, "y"), kind: "file" }), opts())).rejects.toMatchObject({
      code: "SYNC_PATH_OUTSIDE_ROOT",
    });
    expect(await listTree(w.host)).toEqual(["f"]);
  });

  it("accepts a symlinked directory that stays inside a root", async () => {
    await fs.mkdir(path.join(w.root, "real"));
    await fs.symlink("real", path.join(w.root, "alias"));
    const source = await writeHost("f", "x");
    await syncIn(w.runner, inOp({ sourcePath: source, targetPath: path.join(w.root, "alias/f"), kind: "file" }), opts());
    expect(await fs.readFile(path.join(w.root, "real/f"), "utf8")).toBe("x");
  });
});

describe("operations", () => {
  it("run in order and stop at the first failure", async () => {
    const a = await writeHost("a", "1");
    const b = await writeHost("b", "2");
    const ops = [
      { operationId: "first", files: [{ sourcePath: a, targetPath: path.join(w.root, "x"), kind: "file" as const }] },
      { operationId: "second", files: [{ sourcePath: path.join(w.host, "missing"), targetPath: path.join(w.root, "y"), kind: "file" as const }] },
      { operationId: "third", files: [{ sourcePath: b, targetPath: path.join(w.root, "x"), kind: "file" as const }] },
    ];
    const error = await syncIn(w.runner, ops, opts()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect(error).toMatchObject({ code: "SYNC_SOURCE_INVALID", operationId: "second" });
    expect(await fs.readFile(path.join(w.root, "x"), "utf8")).toBe("1");
  });

  it("validates every operation before transferring anything", async () => {
    const a = await writeHost("a", "1");
    const ops = [
      { operationId: "ok", files: [{ sourcePath: a, targetPath: path.join(w.root, "x"), kind: "file" as const }] },
      { operationId: "bad", files: [{ sourcePath: a, targetPath: "/elsewhere/x", kind: "file" as const }] },
    ];
    await expect(syncIn(w.runner, ops, opts())).rejects.toMatchObject({ code: "SYNC_PATH_OUTSIDE_ROOT", operationId: "bad" });
    expect(w.runner.scripts).toEqual([]);
  });

  it("stops when the caller's signal aborts", async () => {
    const a = await writeHost("a", "1");
    const controller = new AbortController();
    controller.abort();
    await expect(syncIn(w.runner, inOp({ sourcePath: a, targetPath: path.join(w.root, "x"), kind: "file" }), { ...opts(), signal: controller.signal })).rejects.toMatchObject({ code: "SYNC_ABORTED" });
  });
});
