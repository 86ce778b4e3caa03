import fs from "node:fs/promises";
import path from "node:path";
import type { PluginSyncFileMapping } from "@paperclipai/plugin-sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Writable } from "node:stream";
import type { ScriptIo, ScriptRunner } from "../transport.js";
import { MAX_LISTED_SKIPPED_LINKS, base64SyncIn, base64SyncOut, syncIn, syncOut } from "./index.js";
import { cannedArchiveRunner, rawTar } from "./__fixtures__/raw-tar.js";
import { listTree, makeWorld, modeOf, type World } from "./__fixtures__/world.js";

/**
 * Sync out from an ordinary (or compromised) sandbox: nothing the agent wrote is lost because of one
 * odd member, and nothing that would be dangerous on the host lands there (issue #11).
 */
let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

const MiB = 1024 * 1024;
const strategies = { streaming: syncOut, base64: base64SyncOut } as const;

function opts(extra: { maxOutboundBytes?: number; log?: (line: string) => void } = {}) {
  return { roots: [w.root], hostScratchDir: w.scratch, ...extra };
}
const op = (...files: PluginSyncFileMapping[]) => [{ operationId: "out", files }];

async function exists(file: string): Promise<boolean> {
  return fs.lstat(file).then(
    () => true,
    () => false,
  );
}

describe("unsafe links are skipped, everything else lands", () => {
  /** A virtualenv-like tree, plus a link to /etc, one escaping the target and one through a skipped link. */
  async function writeVenv(): Promise<string> {
    const venv = path.join(w.root, "ws");
    await fs.mkdir(path.join(venv, "venv/bin"), { recursive: true });
    await fs.mkdir(path.join(venv, "venv/lib/site-packages"), { recursive: true });
    await fs.mkdir(path.join(venv, "out"));
    await fs.writeFile(path.join(venv, "main.py"), "print('work')\n");
    await fs.writeFile(path.join(venv, "venv/pyvenv.cfg"), "home = /usr/bin\n");
    await fs.writeFile(path.join(venv, "venv/lib/site-packages/mod.py"), "x = 1\n");
    await fs.writeFile(path.join(venv, "out/report.txt"), "done\n");
    await fs.symlink("/usr/bin/python3", path.join(venv, "venv/bin/python"));
    await fs.symlink("python", path.join(venv, "venv/bin/python3")); // relative, inside, but through a skipped link
    await fs.symlink("../lib/site-packages/mod.py", path.join(venv, "venv/bin/mod-link")); // relative, inside
    await fs.symlink("/etc", path.join(venv, "out/etc-link"));
    await fs.symlink("../../x", path.join(venv, "out/escape"));
    return venv;
  }

  for (const [name, sync] of Object.entries(strategies)) {
    it(`sync out of a venv-style tree lands its files and reports the skipped link (${name})`, async () => {
      const source = await writeVenv();
      const target = path.join(w.host, "ws");
      const lines: string[] = [];
      const result = await sync(w.runner, op({ sourcePath: source, targetPath: target, kind: "directory" }), opts({ log: (l) => lines.push(l) }));

      const skipped = ["out/escape", "out/etc-link", "venv/bin/python", "venv/bin/python3"].map((p) => path.join(source, p));
      expect(result.operations).toEqual([{ operationId: "out", filesTransferred: 4, bytesTransferred: 14 + 16 + 6 + 5, skippedLinks: skipped, skippedLinkCount: 4 }]);
      expect(await fs.readFile(path.join(target, "main.py"), "utf8")).toBe("print('work')\n");
      expect(await fs.readFile(path.join(target, "out/report.txt"), "utf8")).toBe("done\n");
      expect(await fs.readFile(path.join(target, "venv/lib/site-packages/mod.py"), "utf8")).toBe("x = 1\n");
      expect(await fs.readlink(path.join(target, "venv/bin/mod-link"))).toBe("../lib/site-packages/mod.py");
      for (const p of ["out/escape", "out/etc-link", "venv/bin/python", "venv/bin/python3"]) {
        expect(await exists(path.join(target, p)), p).toBe(false);
      }
      for (const s of skipped) expect(lines.some((l) => l.includes(JSON.stringify(s)) && l.includes("not created on the host"))).toBe(true);
      expect(await listTree(w.outside)).toEqual([]);
      expect(await listTree(w.scratch)).toEqual([]);
    });
  }

  it("a crafted archive's unsafe links are skipped the same way; a write through a link still refuses it all", async () => {
    const target = path.join(w.host, "t");
    const archive = rawTar([
      { path: "./", type: "5" },
      { path: "keep.txt", type: "0", body: "kept" },
      { path: "abs", type: "2", linkpath: w.outside },
      { path: "up", type: "2", linkpath: ".." },
      { path: "s", type: "2", linkpath: "." },
      { path: "l", type: "2", linkpath: "s/.." }, // lexically the root, physically its parent
      { path: "a", type: "5" },
      { path: "a/b", type: "5" },
      { path: "a/b/up2", type: "2", linkpath: "../.." }, // the target itself: kept
      { path: "c", type: "2", linkpath: "a/b/up2/.." }, // climbs out through up2
      { path: "loop1", type: "2", linkpath: "loop2" },
      { path: "loop2", type: "2", linkpath: "loop1" },
    ]);
    const result = await syncOut(cannedArchiveRunner(archive), op({ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }), opts());
    expect(result.operations[0]?.skippedLinks).toEqual(["abs", "c", "l", "loop1", "loop2", "up"].map((p) => path.join(w.root, "src", p)));
    expect(await fs.readFile(path.join(target, "keep.txt"), "utf8")).toBe("kept");
    expect(await fs.readlink(path.join(target, "s"))).toBe(".");
    expect(await fs.readlink(path.join(target, "a/b/up2"))).toBe("../..");
    for (const p of ["abs", "up", "l", "c", "loop1", "loop2"]) expect(await exists(path.join(target, p)), p).toBe(false);
    expect(await listTree(w.outside)).toEqual([]);

    const through = rawTar([
      { path: "escape", type: "2", linkpath: w.outside },
      { path: "escape/pwned", type: "0", body: "x" },
    ]);
    await expect(syncOut(cannedArchiveRunner(through), op({ sourcePath: path.join(w.root, "src"), targetPath: path.join(w.host, "t2"), kind: "directory" }), opts())).rejects.toMatchObject({
      code: "SYNC_ARCHIVE_UNSAFE",
    });
    expect(await listTree(w.outside)).toEqual([]);
    expect(await exists(path.join(w.host, "t2"))).toBe(false);
  });

  it("with followSymlinks the sandbox dereferences links: an absolute one lands as the file it points at", async () => {
    const ws = path.join(w.root, "ws");
    await fs.mkdir(ws);
    await fs.writeFile(path.join(w.root, "real.txt"), "real");
    await fs.symlink(path.join(w.root, "real.txt"), path.join(ws, "abs-link"));
    const target = path.join(w.host, "ws");
    const result = await syncOut(w.runner, op({ sourcePath: ws, targetPath: target, kind: "directory", followSymlinks: true }), opts());
    expect(result.operations[0]).toEqual({ operationId: "out", filesTransferred: 1, bytesTransferred: 4 });
    expect((await fs.lstat(path.join(target, "abs-link"))).isFile()).toBe(true);
    expect(await fs.readFile(path.join(target, "abs-link"), "utf8")).toBe("real");
  });

  it("names at most MAX_LISTED_SKIPPED_LINKS skipped links, and counts them all", async () => {
    const links = Array.from({ length: MAX_LISTED_SKIPPED_LINKS + 5 }, (_, i) => ({ path: `l${String(i).padStart(5, "0")}`, type: "2" as const, linkpath: "/etc" }));
    const lines: string[] = [];
    const result = await syncOut(
      cannedArchiveRunner(rawTar([...links, { path: "kept", type: "0", body: "k" }])),
      op({ sourcePath: path.join(w.root, "src"), targetPath: path.join(w.host, "t"), kind: "directory" }),
      opts({ log: (l) => lines.push(l) }),
    );
    expect(result.operations[0]?.skippedLinks).toHaveLength(MAX_LISTED_SKIPPED_LINKS);
    expect(result.operations[0]?.skippedLinkCount).toBe(MAX_LISTED_SKIPPED_LINKS + 5);
    expect(lines.filter((l) => l.includes("not created on the host (absolute target)"))).toHaveLength(MAX_LISTED_SKIPPED_LINKS);
    expect(lines.some((l) => l.includes("5 more unsafe symlinks not created on the host"))).toBe(true);
    expect(await listTree(path.join(w.host, "t"))).toEqual(["kept"]);
  });
});

describe("setuid, setgid and sticky bits never land on the host", () => {
  async function writeSpecialTree(): Promise<string> {
    const ws = path.join(w.root, "ws");
    await fs.mkdir(path.join(ws, "shared"), { recursive: true });
    await fs.copyFile("/bin/sh", path.join(ws, "x"));
    await fs.chmod(path.join(ws, "x"), 0o4755);
    await fs.copyFile("/bin/sh", path.join(ws, "g"));
    await fs.chmod(path.join(ws, "g"), 0o2755);
    await fs.writeFile(path.join(ws, "sticky"), "s");
    await fs.chmod(path.join(ws, "sticky"), 0o1644);
    await fs.link(path.join(ws, "x"), path.join(ws, "x-hardlink"));
    await fs.chmod(path.join(ws, "shared"), 0o3775);
    return ws;
  }

  for (const [name, sync] of Object.entries(strategies)) {
    it(`a setuid file from the sandbox lands without its setuid bit (${name})`, async () => {
      const ws = await writeSpecialTree();
      expect(await modeOf(path.join(ws, "x"))).toBe(0o4755); // really setuid in the "sandbox"
      const dir = path.join(w.host, "ws");
      await sync(
        w.runner,
        op(
          { sourcePath: ws, targetPath: dir, kind: "directory" },
          { sourcePath: path.join(ws, "x"), targetPath: path.join(w.host, "x"), kind: "file" },
          { sourcePath: path.join(ws, "x"), targetPath: path.join(w.host, "x-mode"), kind: "file", mode: 0o4755 },
          { sourcePath: path.join(ws, "g"), targetPath: path.join(w.host, "g-mode"), kind: "file", mode: 0o7777 },
          { sourcePath: path.join(ws, "shared"), targetPath: path.join(w.host, "shared-mode"), kind: "directory", mode: 0o6770 },
        ),
        opts(),
      );
      expect(await modeOf(path.join(dir, "x"))).toBe(0o755);
      expect(await modeOf(path.join(dir, "x-hardlink"))).toBe(0o755);
      expect(await modeOf(path.join(dir, "g"))).toBe(0o755);
      expect(await modeOf(path.join(dir, "sticky"))).toBe(0o644);
      expect(await modeOf(path.join(dir, "shared"))).toBe(0o1775); // a directory keeps its sticky bit only
      expect(await modeOf(path.join(w.host, "x"))).toBe(0o755);
      expect(await modeOf(path.join(w.host, "x-mode"))).toBe(0o755); // the mapping's mode cannot add them
      expect(await modeOf(path.join(w.host, "g-mode"))).toBe(0o777);
      expect(await modeOf(path.join(w.host, "shared-mode"))).toBe(0o770);
    });
  }

  it("a setuid inode kept by a hardlink after its name is re-declared lands without its setuid bit", async () => {
    const archive = rawTar([
      { path: "a", type: "0", body: "x", mode: 0o4755 },
      { path: "b", type: "1", linkpath: "a" },
      { path: "a", type: "0", body: "y", mode: 0o644 }, // unlinks "a": only "b" names the setuid inode
    ]);
    const target = path.join(w.host, "t");
    await syncOut(cannedArchiveRunner(archive), op({ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }), opts());
    expect(await fs.readFile(path.join(target, "b"), "utf8")).toBe("x");
    expect(await modeOf(path.join(target, "b"))).toBe(0o755);
    expect(await modeOf(path.join(target, "a"))).toBe(0o644);
  });

  it("a setgid directory declared twice lands without its setgid bit", async () => {
    const archive = rawTar([
      { path: "d", type: "5", mode: 0o2755 },
      { path: "d", type: "5", mode: 0o755 }, // tar keeps the first directory's mode (--no-overwrite-dir)
      { path: "d/f", type: "0", body: "f" },
    ]);
    const target = path.join(w.host, "t");
    await syncOut(cannedArchiveRunner(archive), op({ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }), opts());
    expect((await modeOf(path.join(target, "d"))) & 0o7000).toBe(0);
  });
});

describe("sparse files stay sparse", () => {
  const GiB = 1024 * MiB;
  const DATA = 16 * 1024;

  /** A file with three block-aligned data regions (16 KiB in all), holes between them and a trailing hole. */
  async function writeSparse(file: string, size = GiB): Promise<void> {
    const handle = await fs.open(file, "wx");
    try {
      const put = (buf: Buffer, at: number) => handle.write(buf, 0, buf.length, at);
      await put(Buffer.alloc(4096, "h"), 0);
      await put(Buffer.alloc(8192, 7), size / 2);
      await put(Buffer.alloc(4096, "t"), size - 64 * 1024);
      await handle.truncate(size);
    } finally {
      await handle.close();
    }
  }

  async function expectSparseCopy(file: string, size = GiB): Promise<void> {
    const st = await fs.stat(file);
    expect(st.size).toBe(size);
    expect(st.blocks * 512).toBeLessThan(MiB); // allocated: the data regions, not the holes
    const handle = await fs.open(file, "r");
    try {
      const read = async (at: number, n: number) => {
        const buf = Buffer.alloc(n);
        await handle.read(buf, 0, n, at);
        return buf;
      };
      expect((await read(0, 4096)).equals(Buffer.alloc(4096, "h"))).toBe(true);
      expect((await read(size / 2, 8192)).equals(Buffer.alloc(8192, 7))).toBe(true);
      expect((await read(size / 2 - 4096, 4096)).equals(Buffer.alloc(4096))).toBe(true);
      expect((await read(size - 64 * 1024, 4096)).equals(Buffer.alloc(4096, "t"))).toBe(true);
      expect((await read(size - 4096, 4096)).equals(Buffer.alloc(4096))).toBe(true);
    } finally {
      await handle.close();
    }
  }

  /** Wraps the test runner, counting the bytes it hands to the host's stdout sink: all the host receives. */
  function countingRunner(): ScriptRunner & { stdoutBytes: number } {
    const counting = {
      capabilities: w.runner.capabilities,
      stdoutBytes: 0,
      run(script: string, io: ScriptIo) {
        const sink = io.stdout;
        if (sink === undefined) return w.runner.run(script, io);
        const forward =
          typeof sink === "function"
            ? new Writable({ write: (chunk: Buffer, _e, done) => (sink(chunk), done()) })
            : new Writable({
                write: (chunk: Buffer, _e, done) => {
                  if (sink.write(chunk)) done();
                  else sink.once("drain", () => done());
                },
              });
        const counter = new Writable({
          write(chunk: Buffer, _e, done) {
            counting.stdoutBytes += chunk.length;
            forward.write(chunk, () => done());
          },
        });
        return w.runner.run(script, { ...io, stdout: counter });
      },
    };
    return counting;
  }

  it("a sparse 1 GiB file stays sparse on the host and on the way", async () => {
    await fs.mkdir(path.join(w.root, "ws"));
    await writeSparse(path.join(w.root, "ws/disk.img"));
    await fs.writeFile(path.join(w.root, "ws/notes.txt"), "notes");
    const runner = countingRunner();
    const result = await syncOut(
      runner,
      op(
        { sourcePath: path.join(w.root, "ws"), targetPath: path.join(w.host, "ws"), kind: "directory" },
        { sourcePath: path.join(w.root, "ws/disk.img"), targetPath: path.join(w.host, "disk.img"), kind: "file" },
      ),
      // maxOutboundBytes bounds archive bytes, not apparent sizes: 8 MiB is plenty for a sparse 1 GiB
      opts({ maxOutboundBytes: 8 * MiB }),
    );
    await expectSparseCopy(path.join(w.host, "ws/disk.img"));
    await expectSparseCopy(path.join(w.host, "disk.img"));
    expect(await fs.readFile(path.join(w.host, "ws/notes.txt"), "utf8")).toBe("notes");
    // two archives came over, each a few data blocks and headers
    expect(runner.stdoutBytes).toBeLessThan(256 * 1024);
    // bytesTransferred counts the data carried (holes excluded): 16 KiB a copy on 4 KiB blocks
    expect(result.operations[0]?.bytesTransferred).toBe(2 * DATA + 5);
    expect(await listTree(w.scratch)).toEqual([]);
  });

  it("a sparse file stays sparse through the base64 fallback, in one chunk", async () => {
    const size = 256 * MiB;
    await writeSparse(path.join(w.root, "disk.img"), size);
    const result = await base64SyncOut(w.runner, op({ sourcePath: path.join(w.root, "disk.img"), targetPath: path.join(w.host, "disk.img"), kind: "file" }), opts({ maxOutboundBytes: 8 * MiB }));
    await expectSparseCopy(path.join(w.host, "disk.img"), size);
    expect(result.operations[0]?.bytesTransferred).toBe(DATA);
    expect(w.runner.scripts.length).toBe(1); // pack, with the one chunk inline and the stage removed
    expect(await listTree(w.sandboxTmp)).toEqual([]);
  });

  for (const [name, sync] of Object.entries({ streaming: syncIn, base64: base64SyncIn })) {
    it(`with sparseSyncIn, a sparse host file stays sparse in the sandbox (${name})`, async () => {
      const size = 256 * MiB;
      await fs.mkdir(path.join(w.host, "tree"));
      await writeSparse(path.join(w.host, "tree/disk.img"), size);
      const result = await sync(w.runner, [{ operationId: "in", files: [{ sourcePath: path.join(w.host, "tree"), targetPath: path.join(w.root, "tree"), kind: "directory" }] }], {
        roots: [w.root],
        hostScratchDir: w.scratch,
        sparseSyncIn: true,
      });
      await expectSparseCopy(path.join(w.root, "tree/disk.img"), size);
      expect(result.operations[0]?.bytesTransferred).toBe(DATA);
      expect(w.runner.maxStdinBytes).toBeLessThan(MiB); // base64: one small chunk (streaming: not counted)
      expect(await listTree(w.scratch)).toEqual([]);
    });
  }
});
