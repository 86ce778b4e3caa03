// In-jail file ops: run by the supervisor as the sandbox user, confined to roots, never following a
// link sandboxed code planted.
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "./types.js";
import { startWorld, type World } from "./__fixtures__/world.js";

let world: World;
let sandbox: Sandbox;
const WORKSPACE = { roots: ["/workspace"] };

beforeAll(async () => {
  world = startWorld();
  sandbox = await world.create({ id: "file-ops" });
});
afterAll(async () => {
  await world?.close();
});

async function sh(script: string): Promise<string> {
  const handle = await sandbox.exec({ script });
  const exit = await handle.exited;
  const out = (await handle.read("stdout")).data.toString();
  if (exit.exitCode !== 0) throw new Error(`${script}: exit ${exit.exitCode}: ${(await handle.read("stderr")).data}`);
  return out;
}

describe("file ops", () => {
  it("write, read, stat, list, mkdir, move and remove inside the jail, as the sandbox user", async () => {
    const written = await sandbox.files.write("/workspace/dir/a.txt", "alpha\n", { mode: 0o640 });
    expect(written).toMatchObject({ path: "/workspace/dir/a.txt", type: "file", size: 6, mode: 0o640, owner: "sandbox", group: "sandbox", uid: 1000 });
    expect((await sandbox.files.read("/workspace/dir/a.txt")).toString()).toBe("alpha\n");
    expect((await sandbox.files.read("/workspace/dir/a.txt", { offset: 2, length: 3 })).toString()).toBe("pha");
    expect(await sh("stat -c '%a %U' /workspace/dir/a.txt")).toBe("640 sandbox\n");

    const big = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
    await sandbox.files.write("/workspace/dir/big.bin", Readable.from([big.subarray(0, 1_000_000), big.subarray(1_000_000)]));
    expect((await sandbox.files.read("/workspace/dir/big.bin")).equals(big)).toBe(true);
    await expect(sandbox.files.read("/workspace/dir/big.bin", { maxBytes: 1024 })).rejects.toMatchObject({ code: "EFBIG" });

    expect(await sandbox.files.mkdir("/workspace/dir/sub/deep", { parents: true, mode: 0o700 })).toEqual({ created: true });
    expect(await sandbox.files.mkdir("/workspace/dir/sub/deep")).toEqual({ created: false });
    expect((await sandbox.files.stat("/workspace/dir/sub/deep")).mode).toBe(0o700);
    const listed = await sandbox.files.list("/workspace/dir", { depth: 2 });
    expect(listed.map((entry) => `${entry.path}:${entry.type}`)).toEqual([
      "/workspace/dir/a.txt:file",
      "/workspace/dir/big.bin:file",
      "/workspace/dir/sub:directory",
      "/workspace/dir/sub/deep:directory",
    ]);

    const moved = await sandbox.files.move("/workspace/dir/a.txt", "/workspace/dir/sub/b.txt");
    expect(moved).toMatchObject({ path: "/workspace/dir/sub/b.txt", type: "file" });
    await sandbox.files.write("/workspace/dir/c.txt", "c");
    await expect(sandbox.files.move("/workspace/dir/c.txt", "/workspace/dir/sub/b.txt")).rejects.toMatchObject({ code: "EEXIST" });
    await sandbox.files.move("/workspace/dir/c.txt", "/workspace/dir/sub/b.txt", { overwrite: true });
    // Across two of the jail's mounts too.
    await sandbox.files.move("/workspace/dir/sub/b.txt", "/tmp/b.txt");
    expect(await sh("cat /tmp/b.txt; test -e /workspace/dir/sub/b.txt || echo ' moved'")).toBe("c moved\n");

    await expect(sandbox.files.remove("/workspace/dir")).rejects.toMatchObject({ code: "ENOTEMPTY" });
    await sandbox.files.remove("/workspace/dir", { recursive: true });
    await expect(sandbox.files.stat("/workspace/dir")).rejects.toMatchObject({ code: "ENOENT", path: "/workspace/dir", message: "/workspace/dir: no such file or directory" });
    await expect(sandbox.files.read("/etc/passwd-nope")).rejects.toMatchObject({ name: "SandboxFileError", code: "ENOENT" });
    await expect(sandbox.files.write("/usr/x", "no")).rejects.toMatchObject({ code: expect.stringMatching(/EROFS|EACCES/) });
    await expect(sandbox.files.read("relative/path")).rejects.toThrow(/must be absolute/);
  });

  it("refuses a path through a symlink that sandboxed code planted pointing outside the roots", async () => {
    // Sandboxed code plants links: to a directory outside the roots, and to a file outside them.
    await sh(
      "mkdir -p /home/sandbox/private && echo secret > /home/sandbox/private/key && ln -s /home/sandbox/private /workspace/link && ln -s /home/sandbox/private/key /workspace/key-link && ln -s /etc /workspace/etc-link",
    );
    const refused = { code: "EOUTSIDE" };
    await expect(sandbox.files.read("/workspace/link/key", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.read("/workspace/key-link", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.read("/workspace/etc-link/passwd", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.read("/workspace/../home/sandbox/private/key", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.write("/workspace/link/planted", "x", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.list("/workspace/link", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.stat("/workspace/link/key", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.stat("/workspace/key-link", { ...WORKSPACE, follow: true })).rejects.toMatchObject(refused);
    await expect(sandbox.files.mkdir("/workspace/link/new", { ...WORKSPACE, parents: true })).rejects.toMatchObject(refused);
    await expect(sandbox.files.remove("/workspace/link/key", WORKSPACE)).rejects.toMatchObject(refused);
    await expect(sandbox.files.move("/workspace/link/key", "/workspace/stolen", WORKSPACE)).rejects.toMatchObject(refused);
    expect(await sh("cat /home/sandbox/private/key; ls /home/sandbox/private")).toBe("secret\nkey\n");

    // The link itself is inside the roots: it can be seen (not followed) and removed.
    expect(await sandbox.files.stat("/workspace/key-link", WORKSPACE)).toMatchObject({ type: "symlink", symlinkTarget: "/home/sandbox/private/key" });
    // A write never follows a final-component link: it replaces the link, the target is untouched.
    const replaced = await sandbox.files.write("/workspace/key-link", "mine\n", WORKSPACE);
    expect(replaced.type).toBe("file");
    expect(await sh("cat /home/sandbox/private/key; cat /workspace/key-link; test -L /workspace/key-link || echo not-a-link")).toBe("secret\nmine\nnot-a-link\n");
    await sandbox.files.remove("/workspace/link", WORKSPACE);
    expect(await sh("ls /home/sandbox/private")).toBe("key\n");
    // A root itself can be listed, never removed.
    expect((await sandbox.files.list("/workspace", WORKSPACE)).map((entry) => entry.name)).toContain("etc-link");
    await expect(sandbox.files.remove("/workspace", WORKSPACE)).rejects.toMatchObject(refused);
  });

  it("without roots the whole jail is reachable, and still only as the sandbox user sees it", async () => {
    expect((await sandbox.files.read("/etc/passwd")).toString()).toContain("sandbox:x:1000:1000");
    // The host's files are not in the jail at all.
    const hostOnly = path.join(world.stateDir, "host-only.txt");
    fs.writeFileSync(hostOnly, "host");
    await expect(sandbox.files.read(hostOnly)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
