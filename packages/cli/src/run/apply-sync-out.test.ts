import { cp, lstat, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { applySyncOut } from "./apply-sync-out.js";
import { compileExcludes } from "@paperclip-sandbox/kit";
import { snapshotTree } from "./workspace-snapshot.js";

describe("applying a sandbox's changes to the workspace", () => {
  let root: string;
  let workspace: string;
  let staged: string;
  const none = () => false;

  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "pcs-apply-"));
    workspace = path.join(root, "ws");
    staged = path.join(root, "staged");
    await mkdir(path.join(workspace, "src"), { recursive: true });
    await writeFile(path.join(workspace, "keep.txt"), "same\n");
    await writeFile(path.join(workspace, "edit.txt"), "old\n");
    await writeFile(path.join(workspace, "gone.txt"), "bye\n");
    await writeFile(path.join(workspace, "src", "both.txt"), "base\n");
  });
  afterEach(async () => rm(root, { recursive: true, force: true }));

  async function sandboxCopy() {
    await cp(workspace, staged, { recursive: true, verbatimSymlinks: true });
  }

  it("creates, updates and deletes what the sandbox changed, with modes", async () => {
    const before = await snapshotTree(workspace, none);
    await sandboxCopy();
    await writeFile(path.join(staged, "edit.txt"), "new\n");
    await rm(path.join(staged, "gone.txt"));
    await mkdir(path.join(staged, "out"));
    await writeFile(path.join(staged, "out", "run.sh"), "#!/bin/sh\n", { mode: 0o755 });

    const result = await applySyncOut(before, staged, workspace, none);
    expect(result.updated).toEqual(["edit.txt"]);
    expect(result.deleted).toEqual(["gone.txt"]);
    expect(result.created.sort()).toEqual(["out", "out/run.sh"]);
    expect(result.conflicts).toEqual([]);
    expect(await readFile(path.join(workspace, "edit.txt"), "utf8")).toBe("new\n");
    expect(existsSync(path.join(workspace, "gone.txt"))).toBe(false);
    expect((await stat(path.join(workspace, "out", "run.sh"))).mode & 0o777).toBe(0o755);
  });

  it("keeps a local absolute link that sync out left out (a venv's bin/python) instead of deleting it", async () => {
    await mkdir(path.join(workspace, "venv", "bin"), { recursive: true });
    await symlink("/usr/bin/python3", path.join(workspace, "venv", "bin", "python"));
    const before = await snapshotTree(workspace, none);
    await sandboxCopy();
    await rm(path.join(staged, "venv", "bin", "python")); // what the kit's sync out does with an unsafe link
    const result = await applySyncOut(before, staged, workspace, none, new Set(["venv/bin/python"]));
    expect(result.deleted).toEqual([]);
    expect((await lstat(path.join(workspace, "venv", "bin", "python"))).isSymbolicLink()).toBe(true);
  });

  it("keeps a file changed locally during the run instead of clobbering it", async () => {
    const before = await snapshotTree(workspace, none);
    await sandboxCopy();
    await writeFile(path.join(staged, "src", "both.txt"), "sandbox\n");
    await rm(path.join(staged, "edit.txt"));
    await writeFile(path.join(workspace, "src", "both.txt"), "local edit\n");
    await writeFile(path.join(workspace, "edit.txt"), "local edit\n");

    const result = await applySyncOut(before, staged, workspace, none);
    expect(result.conflicts.sort()).toEqual(["edit.txt", "src/both.txt"]);
    expect(await readFile(path.join(workspace, "src", "both.txt"), "utf8")).toBe("local edit\n");
    expect(await readFile(path.join(workspace, "edit.txt"), "utf8")).toBe("local edit\n");
  });

  it("never writes through a local symlink the sandbox replaced by a directory", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await symlink(outside, path.join(workspace, "link"));
    const before = await snapshotTree(workspace, none);
    await sandboxCopy();
    await rm(path.join(staged, "link"));
    await mkdir(path.join(staged, "link"));
    await writeFile(path.join(staged, "link", "planted.txt"), "x");
    // The link is replaced by a real directory; nothing lands where the link pointed.
    const result = await applySyncOut(before, staged, workspace, none);
    expect(existsSync(path.join(outside, "planted.txt"))).toBe(false);
    expect((await lstat(path.join(workspace, "link"))).isDirectory()).toBe(true);
    expect(result.updated).toContain("link");
  });

  it("skips paths below a local symlink that changed during the run", async () => {
    const outside = path.join(root, "outside");
    await mkdir(outside);
    await mkdir(path.join(workspace, "dir"));
    const before = await snapshotTree(workspace, none);
    await sandboxCopy();
    await writeFile(path.join(staged, "dir", "planted.txt"), "x");
    // Locally, someone swaps the directory for a link pointing outside the workspace.
    await rm(path.join(workspace, "dir"), { recursive: true });
    await symlink(outside, path.join(workspace, "dir"));
    const result = await applySyncOut(before, staged, workspace, none);
    expect(existsSync(path.join(outside, "planted.txt"))).toBe(false);
    expect(result.skipped).toContain("dir/planted.txt");
  });

  it("leaves excluded paths alone in both directions", async () => {
    await mkdir(path.join(workspace, "node_modules"));
    await writeFile(path.join(workspace, "node_modules", "big.js"), "x");
    const matcher = compileExcludes(["node_modules"]);
    const excluded = (p: string) => matcher.excludes(p);
    const before = await snapshotTree(workspace, excluded);
    expect([...before.keys()]).not.toContain("node_modules");
    await sandboxCopy();
    await rm(path.join(staged, "node_modules"), { recursive: true });
    const result = await applySyncOut(before, staged, workspace, excluded);
    expect(result.deleted).toEqual([]);
    expect(existsSync(path.join(workspace, "node_modules", "big.js"))).toBe(true);
  });
});
