import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { syncOut } from "./index.js";
import { cannedArchiveRunner, rawTar, type RawMember } from "./__fixtures__/raw-tar.js";
import { listTree, makeWorldWithTarget, type World } from "./__fixtures__/world.js";

/**
 * syncOut must refuse (never extracting what it refuses) any archive a compromised sandbox could craft to
 * write outside the host target. Each case: the sandbox "answers" with a hand-built archive; the
 * sync must fail with SYNC_ARCHIVE_UNSAFE, the sentinel directory next to the target must stay
 * empty, the previous target must be intact, and no scratch or staging may remain. Symlinks that
 * point out are the exception: ordinary trees have them, so they are skipped (never created) and
 * the rest lands.
 */
let w: World;
let target: string;
beforeEach(async () => {
  ({ w, target } = await makeWorldWithTarget());
});
afterEach(async () => {
  await w.cleanup();
});

async function expectRefused(members: RawMember[] | Buffer, kind: "file" | "directory" = "directory"): Promise<void> {
  const archive = Buffer.isBuffer(members) ? members : rawTar(members);
  const runner = cannedArchiveRunner(archive);
  const mappingTarget = kind === "directory" ? target : path.join(w.host, "single-file");
  await expect(
    syncOut(runner, [{ operationId: "hostile", files: [{ sourcePath: path.join(w.root, "src"), targetPath: mappingTarget, kind }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    }),
  ).rejects.toMatchObject({ code: "SYNC_ARCHIVE_UNSAFE", operationId: "hostile" });
  expect(await listTree(w.outside)).toEqual([]);
  expect(await listTree(w.host)).toEqual(["target", "target/previous"]);
  expect(await fs.readFile(path.join(target, "previous"), "utf8")).toBe("intact");
  expect(await listTree(w.scratch)).toEqual([]);
}

const outsideRel = "../outside"; // from the target's parent ("host"), ../outside is the sentinel

describe("hostile outbound archives are refused with nothing written outside", () => {
  it("a ../ member", async () => {
    await expectRefused([{ path: `../../outside/pwned`, type: "0", body: "x" }]);
    await expectRefused([{ path: `ok/../../x`, type: "0", body: "x" }]);
  });

  it("an absolute member path", async () => {
    await expectRefused([{ path: path.join(w.outside, "pwned"), type: "0", body: "x" }]);
  });

  it("a symlink pointing out (absolute, relative, and through another link) is skipped, never created", async () => {
    const cases: RawMember[][] = [
      [{ path: "link", type: "2", linkpath: w.outside }],
      [{ path: "sub/link", type: "2", linkpath: `../../${outsideRel}` }],
      [{ path: "link", type: "2", linkpath: ".." }],
      // lexically "s/.." is the root, but s -> "." so it really is the target's parent
      [
        { path: "s", type: "2", linkpath: "." },
        { path: "link", type: "2", linkpath: "s/.." },
      ],
      // each link alone looks inside; chained they climb out
      [
        { path: "a", type: "5" },
        { path: "a/b", type: "5" },
        { path: "a/b/up", type: "2", linkpath: "../.." },
        { path: "link", type: "2", linkpath: "a/b/up/.." },
      ],
    ];
    for (const members of cases) {
      const skipped = members.find((m) => m.path.endsWith("link"))?.path as string;
      const result = await syncOut(
        cannedArchiveRunner(rawTar([...members, { path: "kept", type: "0", body: "k" }])),
        [{ operationId: "links", files: [{ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }] }],
        { roots: [w.root], hostScratchDir: w.scratch },
      );
      expect(result.operations[0]?.skippedLinks).toEqual([path.join(w.root, "src", skipped)]);
      const landed = await listTree(target);
      expect(landed).toContain("kept");
      expect(landed).not.toContain(skipped);
      expect(await listTree(w.outside)).toEqual([]);
      expect(await listTree(w.scratch)).toEqual([]);
    }
  });

  it("a hardlink pointing out, or at something that is not an earlier member", async () => {
    await expectRefused([{ path: "hard", type: "1", linkpath: `${outsideRel}/victim` }]);
    await expectRefused([{ path: "hard", type: "1", linkpath: path.join(w.outside, "victim") }]);
    await expectRefused([
      { path: "hard", type: "1", linkpath: "later" },
      { path: "later", type: "0", body: "x" },
    ]);
  });

  it("a symlink member followed by a member written through it", async () => {
    await expectRefused([
      { path: "escape", type: "2", linkpath: `../${outsideRel}` },
      { path: "escape/pwned", type: "0", body: "x" },
    ]);
    // the link itself points inside, the attack is the write through it (symlink swapped in)
    await expectRefused([
      { path: "dir", type: "5" },
      { path: "alias", type: "2", linkpath: "dir" },
      { path: "alias/file", type: "0", body: "x" },
    ]);
    // the symlink comes after the member below it
    await expectRefused([
      { path: "a/file", type: "0", body: "x" },
      { path: "a", type: "2", linkpath: "." },
    ]);
    // a directory then a symlink under the same name
    await expectRefused([
      { path: "d", type: "5" },
      { path: "d", type: "2", linkpath: `../${outsideRel}` },
      { path: "d/pwned", type: "0", body: "x" },
    ]);
  });

  it("device and fifo entries", async () => {
    await expectRefused([{ path: "tty", type: "3" }]);
    await expectRefused([{ path: "disk", type: "4" }]);
    await expectRefused([{ path: "pipe", type: "6" }]);
  });

  it("a root member that is not a directory, and garbage or truncated input", async () => {
    await expectRefused([{ path: "./", type: "2", linkpath: w.outside }]);
    await expectRefused(Buffer.from("this is not a tar archive at all".repeat(40)));
    const truncated = rawTar([{ path: "big", type: "0", body: Buffer.alloc(4096, 1) }]).subarray(0, 2048);
    await expectRefused(truncated);
  });

  it("a file mapping whose archive holds anything but one regular file", async () => {
    await expectRefused([{ path: "f", type: "2", linkpath: "g" }], "file");
    await expectRefused(
      [
        { path: "f", type: "0", body: "1" },
        { path: "g", type: "0", body: "2" },
      ],
      "file",
    );
    await expectRefused([{ path: "d/f", type: "0", body: "1" }], "file");
  });
});

describe("benign outbound archives", () => {
  it("accept relative symlinks and hardlinks that stay inside", async () => {
    const archive = rawTar([
      { path: "./", type: "5", mode: 0o750 },
      { path: "lib", type: "5" },
      { path: "lib/real.js", type: "0", body: "code", mode: 0o640 },
      { path: "bin", type: "5" },
      { path: "bin/tool", type: "2", linkpath: "../lib/real.js" },
      { path: "bin/same", type: "1", linkpath: "lib/real.js" },
      { path: "self", type: "2", linkpath: "." },
    ]);
    const result = await syncOut(cannedArchiveRunner(archive), [{ operationId: "ok", files: [{ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(result.operations[0]).toEqual({ operationId: "ok", filesTransferred: 1, bytesTransferred: 4 });
    expect(await fs.readlink(path.join(target, "bin/tool"))).toBe("../lib/real.js");
    expect(await fs.readFile(path.join(target, "bin/same"), "utf8")).toBe("code");
    expect((await fs.stat(target)).mode & 0o777).toBe(0o750);
    expect((await fs.stat(path.join(target, "lib/real.js"))).mode & 0o777).toBe(0o640);
    expect(await listTree(w.outside)).toEqual([]);
  });

  it("strip setuid/setgid bits from sandbox modes", async () => {
    const archive = rawTar([{ path: "suid", type: "0", body: "x", mode: 0o4755 }]);
    await syncOut(cannedArchiveRunner(archive), [{ operationId: "ok", files: [{ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect((await fs.stat(path.join(target, "suid"))).mode & 0o7777).toBe(0o755);
  });
});
