import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { syncIn, syncOut } from "./index.js";
import { overrideSystemTar, systemTar } from "./system-tar.js";
import { TarParser, type TarMember } from "./tar-parse.js";
import { cannedArchiveRunner } from "./__fixtures__/raw-tar.js";
import { listTree, makeWorld, makeWorldWithTarget, modeOf, writeModesTree, type World } from "./__fixtures__/world.js";

/** One header block: any typeflag, either magic, optional prefix, checksum computed. */
function header(opts: { name: string; type: string; size?: number; linkpath?: string; mode?: number; prefix?: string; magic?: "posix" | "gnu" | "none" }): Buffer {
  const h = Buffer.alloc(512);
  const put = (offset: number, length: number, value: string) => h.write(value, offset, length, "utf8");
  const octal = (offset: number, length: number, value: number) => put(offset, length, value.toString(8).padStart(length - 1, "0") + "\0");
  put(0, 100, opts.name);
  octal(100, 8, opts.mode ?? 0o644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, opts.size ?? 0);
  octal(136, 12, 1_700_000_000);
  h.fill(" ", 148, 156);
  put(156, 1, opts.type);
  if (opts.linkpath !== undefined) put(157, 100, opts.linkpath);
  const magic = opts.magic ?? "posix";
  if (magic === "posix") put(257, 8, "ustar\u000000");
  if (magic === "gnu") put(257, 8, "ustar  \u0000");
  if (opts.prefix !== undefined) put(345, 155, opts.prefix);
  let sum = 0;
  for (const byte of h) sum += byte;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

const pad = (body: Buffer) => Buffer.concat([body, Buffer.alloc((512 - (body.length % 512)) % 512)]);
const pax = (records: Record<string, string>) => {
  const text = Object.entries(records)
    .map(([k, v]) => {
      const rest = ` ${k}=${v}\n`;
      let len = rest.length + 1;
      while (String(len).length + rest.length !== len) len++;
      return `${len}${rest}`;
    })
    .join("");
  return Buffer.from(text);
};
const meta = (type: string, body: Buffer) => Buffer.concat([header({ name: "././@meta", type, size: body.length }), pad(body)]);
const file = (name: string, body: string, extra: Partial<Parameters<typeof header>[0]> = {}) =>
  Buffer.concat([header({ name, type: "0", size: Buffer.byteLength(body), ...extra }), pad(Buffer.from(body))]);
const END = Buffer.alloc(1024);

function parse(archive: Buffer, chunk = 100): TarMember[] {
  const members: TarMember[] = [];
  const parser = new TarParser((m) => members.push(m));
  for (let i = 0; i < archive.length; i += chunk) parser.write(archive.subarray(i, i + chunk));
  parser.end();
  return members;
}

describe("TarParser", () => {
  it("reads GNU tar's own output (long names and links) exactly, in any chunking", async () => {
    const w = await makeWorld();
    try {
      const deep = path.join(w.host, "t", "a".repeat(90), "b".repeat(90));
      await fs.mkdir(deep, { recursive: true });
      await fs.writeFile(path.join(deep, "c".repeat(120)), "hello");
      await fs.symlink("x".repeat(150), path.join(w.host, "t", "long-link"));
      if ((await systemTar()) === null) return;
      const archive = execFileSync("tar", ["-c", "-f", "-", "--format=gnu", "-C", path.join(w.host, "t"), "."]);
      for (const chunk of [1, 511, 512, 4096, archive.length]) {
        const members = parse(archive, chunk);
        const byPath = new Map(members.map((m) => [m.path, m]));
        const name = `./${"a".repeat(90)}/${"b".repeat(90)}/${"c".repeat(120)}`;
        expect(byPath.get(name)).toMatchObject({ type: "File", size: 5 });
        expect(byPath.get("./long-link")).toMatchObject({ type: "SymbolicLink", linkpath: "x".repeat(150) });
        const last = members[members.length - 1] as TarMember;
        expect(members[0]?.start).toBe(0);
        expect(last.end).toBeLessThanOrEqual(archive.length);
      }
    } finally {
      await w.cleanup();
    }
  });

  it("applies a pax path, linkpath and size, and the POSIX prefix only with the POSIX magic", () => {
    const members = parse(
      Buffer.concat([
        meta("x", pax({ path: "from-pax", size: "3" })),
        header({ name: "ignored", type: "0", size: 0 }),
        pad(Buffer.from("abc")),
        header({ name: "name", type: "0", prefix: "dir" }),
        header({ name: "name", type: "0", prefix: "dir", magic: "gnu" }),
        END,
      ]),
    );
    expect(members.map((m) => [m.path, m.size])).toEqual([
      ["from-pax", 3],
      ["dir/name", 0],
      ["name", 0],
    ]);
  });

  it.each<[string, Buffer]>([
    ["a bad checksum", Buffer.concat([Buffer.from(header({ name: "f", type: "0" })).fill(0x41, 0, 1), END])],
    ["an unknown magic", Buffer.concat([header({ name: "f", type: "0", magic: "none" }), END])],
    ["a global pax header", Buffer.concat([meta("g", pax({ path: "x" })), file("f", "x"), END])],
    ["a GNU sparse pax key", Buffer.concat([meta("x", pax({ "GNU.sparse.map": "0,1" })), file("f", "x"), END])],
    ["a long name and a pax path together", Buffer.concat([meta("L", Buffer.from("a\0")), meta("x", pax({ path: "b" })), file("f", "x"), END])],
    ["two long names", Buffer.concat([meta("L", Buffer.from("a\0")), meta("L", Buffer.from("b\0")), file("f", "x"), END])],
    ["a metadata header with no member", Buffer.concat([meta("x", pax({ path: "b" })), END])],
    ["a malformed pax record", Buffer.concat([meta("x", Buffer.from("99 path=x\n")), file("f", "x"), END])],
    ["a symlink carrying data", Buffer.concat([header({ name: "l", type: "2", size: 1, linkpath: "t" }), pad(Buffer.from("x")), END])],
    ["a regular member named like a directory", Buffer.concat([file("d/", ""), END])],
    ["a lone zero block", Buffer.concat([file("a", "x"), Buffer.alloc(512), file("b", "y"), END])],
    ["data after the end-of-archive marker", Buffer.concat([file("a", "x"), END, Buffer.from("trailing")])],
    ["no end-of-archive marker", file("a", "x")],
    ["a malformed size", Buffer.concat([Buffer.from(header({ name: "f", type: "0" })), END]).fill(0x39, 124, 125)],
  ])("refuses %s", (_label, archive) => {
    expect(() => parse(archive)).toThrow(expect.objectContaining({ code: "TAR_BAD_ARCHIVE" }));
  });
});

describe("hostile archives using tar extensions", () => {
  let w: World;
  let target: string;
  beforeEach(async () => {
    ({ w, target } = await makeWorldWithTarget());
  });
  afterEach(async () => {
    await w.cleanup();
  });

  const refused = async (archive: Buffer) => {
    await expect(
      syncOut(cannedArchiveRunner(archive), [{ operationId: "h", files: [{ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }] }], {
        roots: [w.root],
        hostScratchDir: w.scratch,
      }),
    ).rejects.toMatchObject({ code: "SYNC_ARCHIVE_UNSAFE" });
    expect(await listTree(w.outside)).toEqual([]);
    expect(await listTree(w.host)).toEqual(["target", "target/previous"]);
    expect(await listTree(w.scratch)).toEqual([]);
  };

  it("a pax path, a GNU long name or a POSIX prefix that climbs out", async () => {
    await refused(Buffer.concat([meta("x", pax({ path: "../../outside/pwned" })), file("innocent", "x"), END]));
    await refused(Buffer.concat([meta("L", Buffer.from("../../outside/pwned\0")), file("innocent", "x"), END]));
    await refused(Buffer.concat([file("pwned", "x", { prefix: "../../outside" }), END]));
  });

  it("a pax linkpath that points out, behind an innocent header linkpath (the link is skipped, judged by the pax one)", async () => {
    const archive = Buffer.concat([meta("x", pax({ linkpath: "../../outside" })), header({ name: "l", type: "2", linkpath: "ok" }), file("kept", "k"), END]);
    const result = await syncOut(cannedArchiveRunner(archive), [{ operationId: "h", files: [{ sourcePath: path.join(w.root, "src"), targetPath: target, kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(result.operations[0]?.skippedLinks).toEqual([path.join(w.root, "src/l")]);
    expect(await listTree(w.host)).toEqual(["target", "target/kept"]);
    expect(await listTree(w.outside)).toEqual([]);
    expect(await listTree(w.scratch)).toEqual([]);
  });
});

describe("without GNU tar on the host (node-tar fallback)", () => {
  let w: World;
  beforeEach(async () => {
    overrideSystemTar(null);
    w = await makeWorld();
  });
  afterEach(async () => {
    await w.cleanup();
  });
  afterAll(() => overrideSystemTar(undefined));

  it("round-trips a tree with modes, symlinks and excludes", async () => {
    const tree = await writeModesTree(w, "#!/bin/sh\n");
    const target = path.join(w.root, "tree");
    const mapping = { sourcePath: tree, targetPath: target, kind: "directory" as const, exclude: ["*.log"] };
    const result = await syncIn(w.runner, [{ operationId: "in", files: [mapping] }], { roots: [w.root] });
    expect(result.operations[0]).toMatchObject({ filesTransferred: 2, bytesTransferred: 11 });
    expect(await listTree(target)).toEqual(["bin", "bin/run", "key", "link"]);
    await fs.writeFile(path.join(target, "again.log"), "l");
    const back = path.join(w.host, "back");
    await syncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory", exclude: ["*.log"] }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(await listTree(back)).toEqual(["bin", "bin/run", "key", "link"]);
    expect(await modeOf(path.join(back, "key"))).toBe(0o600);
    expect(await modeOf(path.join(back, "bin/run"))).toBe(0o755);
    expect(await fs.readlink(path.join(back, "link"))).toBe("bin/run");
    expect(await listTree(w.scratch)).toEqual([]);
  });

  it("lands a sparse sandbox file complete (its holes filled: node-tar cannot write them), never asking for sparse members", async () => {
    const handle = await fs.open(path.join(w.root, "disk.img"), "wx");
    await handle.write(Buffer.alloc(4096, 9), 0, 4096, 4 * 1024 * 1024);
    await handle.truncate(8 * 1024 * 1024);
    await handle.close();
    const back = path.join(w.host, "disk.img");
    await syncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: path.join(w.root, "disk.img"), targetPath: back, kind: "file" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(w.runner.scripts.some((script) => script.includes("--sparse"))).toBe(false);
    const content = await fs.readFile(back);
    expect(content.length).toBe(8 * 1024 * 1024);
    expect(content.subarray(4 * 1024 * 1024, 4 * 1024 * 1024 + 4096).equals(Buffer.alloc(4096, 9))).toBe(true);
  });

  it("refuses a sparse member it could not land with its holes", async () => {
    const sparse = header({ name: "s", type: "S", size: 0, magic: "gnu" });
    await expect(
      syncOut(cannedArchiveRunner(Buffer.concat([sparse, END])), [{ operationId: "out", files: [{ sourcePath: path.join(w.root, "src"), targetPath: path.join(w.host, "t"), kind: "directory" }] }], {
        roots: [w.root],
        hostScratchDir: w.scratch,
      }),
    ).rejects.toMatchObject({ code: "SYNC_ARCHIVE_UNSAFE" });
    expect(await listTree(w.host)).toEqual([]);
  });

  it("lands a setuid file without its setuid bit", async () => {
    await fs.mkdir(path.join(w.root, "ws"));
    await fs.copyFile("/bin/sh", path.join(w.root, "ws/x"));
    await fs.chmod(path.join(w.root, "ws/x"), 0o4755);
    await syncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: path.join(w.root, "ws"), targetPath: path.join(w.host, "ws"), kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(await modeOf(path.join(w.host, "ws/x"))).toBe(0o755);
  });

  it("still refuses a dangling link with followSymlinks, leaving the target untouched", async () => {
    await fs.mkdir(path.join(w.host, "broken"));
    await fs.symlink("does-not-exist", path.join(w.host, "broken/dangling"));
    const target = path.join(w.root, "broken");
    await fs.mkdir(target);
    await fs.writeFile(path.join(target, "precious"), "keep me");
    await expect(
      syncIn(w.runner, [{ operationId: "in", files: [{ sourcePath: path.join(w.host, "broken"), targetPath: target, kind: "directory", followSymlinks: true }] }], {
        roots: [w.root],
      }),
    ).rejects.toMatchObject({ code: "SYNC_SOURCE_INVALID" });
    expect(await fs.readFile(path.join(target, "precious"), "utf8")).toBe("keep me");
  });
});

describe("with GNU tar on the host", () => {
  let w: World;
  beforeEach(async () => {
    w = await makeWorld();
  });
  afterEach(async () => {
    await w.cleanup();
  });

  it("refuses a symlink loop with followSymlinks instead of walking forever", async () => {
    if ((await systemTar()) === null) return;
    await fs.mkdir(path.join(w.host, "loop/sub"), { recursive: true });
    await fs.symlink("..", path.join(w.host, "loop/sub/up"));
    await expect(
      syncIn(w.runner, [{ operationId: "in", files: [{ sourcePath: path.join(w.host, "loop"), targetPath: path.join(w.root, "loop"), kind: "directory", followSymlinks: true }] }], {
        roots: [w.root],
      }),
    ).rejects.toMatchObject({ code: "SYNC_SOURCE_INVALID" });
    expect(await listTree(w.root)).toEqual([]);
  });

  it("packs names that tar would otherwise read as options, escapes or wildcards", async () => {
    const tree = path.join(w.host, "odd");
    await fs.mkdir(tree);
    const names = ["-rf", "a\\nb", "star*", "new\nline", "sp ace", "ünï"];
    for (const name of names) await fs.writeFile(path.join(tree, name), name);
    const target = path.join(w.root, "odd");
    const result = await syncIn(w.runner, [{ operationId: "in", files: [{ sourcePath: tree, targetPath: target, kind: "directory" }] }], { roots: [w.root] });
    expect(result.operations[0]?.filesTransferred).toBe(names.length);
    expect(await listTree(target)).toEqual([...names].sort());
    const back = path.join(w.host, "odd.back");
    await syncOut(w.runner, [{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    for (const name of names) expect(await fs.readFile(path.join(back, name), "utf8")).toBe(name);
  });
});
