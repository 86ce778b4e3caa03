import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ReadEntry } from "tar";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ArchiveLanding } from "./archive-land.js";
import { cannedArchiveRunner, rawTar, type RawMember } from "./__fixtures__/raw-tar.js";
import { syncOut } from "./sync-out.js";
import { compileExcludes } from "./exclude-glob.js";
import { overrideSystemTar, systemTar } from "./system-tar.js";

/**
 * The landing extracts while the archive arrives, so what it hands the extractor is the safety
 * boundary. A stand-in "GNU tar" records its stdin: exactly the bytes the extractor would get.
 */
let dir: string;
let record: string;
beforeEach(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "landing-test-"));
  record = path.join(dir, "stdin.tar");
  const fake = path.join(dir, "fake-tar");
  await fs.writeFile(fake, `#!/bin/sh\ncat > '${record}'\n`, { mode: 0o755 });
  overrideSystemTar(fake);
});
afterEach(async () => {
  overrideSystemTar(undefined);
  await fs.rm(dir, { recursive: true, force: true });
});

/**
 * Writes the archive in odd-sized pieces (headers straddle writes), then lands it: `serial` waits
 * for each piece to be handled, `batched` writes them all at once (they queue up and go together).
 */
async function feed(archive: Buffer, how: "serial" | "batched", exclude?: string[]): Promise<{ landed: unknown; extractorGot: Buffer }> {
  const landing = new ArchiveLanding(path.join(dir, "host", "target"), {
    kind: "directory",
    matcher: compileExcludes(exclude),
    gnuSparse: false,
    mode: undefined,
    limitBytes: 1 << 30,
  });
  let landed: unknown;
  try {
    for (let i = 0; i < archive.length; i += 777) {
      const piece = archive.subarray(i, i + 777);
      if (how === "batched") landing.write(piece);
      else await new Promise((done) => landing.write(piece, done));
    }
    await landing.finished();
    landed = await landing.land();
  } catch (error) {
    landed = error;
  } finally {
    await landing.dispose();
  }
  return { landed, extractorGot: await fs.readFile(record).catch(() => Buffer.alloc(0)) };
}

const body = (n: number, fill: number) => Buffer.alloc(n, fill);

describe("what reaches the extractor", () => {
  it.each(["serial", "batched"] as const)("only accepted members, byte for byte, with setuid/setgid cleared in their headers (%s)", async (how) => {
    const kept: RawMember[] = [
      { path: "./", type: "5" },
      { path: "keep.txt", type: "0", body: body(1300, 0x61) },
      { path: "suid", type: "0", body: body(700, 0x62), mode: 0o755 },
      { path: "hard", type: "1", linkpath: "suid" },
      { path: "sgid-dir", type: "5", mode: 0o755 },
    ];
    const sent: RawMember[] = [
      kept[0] as RawMember,
      kept[1] as RawMember,
      { path: "skip.log", type: "0", body: body(5000, 0x63) },
      { path: "link", type: "2", linkpath: "keep.txt" },
      { ...(kept[2] as RawMember), mode: 0o4755 },
      kept[3] as RawMember,
      { ...(kept[4] as RawMember), mode: 0o2755 },
    ];
    const { landed, extractorGot } = await feed(rawTar(sent), how, ["*.log"]);
    expect(landed).toMatchObject({ counts: { files: 2 } });
    expect(extractorGot.equals(rawTar(kept))).toBe(true);
    // The symlink is created by the landing itself, after extraction.
    expect(await fs.readlink(path.join(dir, "host", "target", "link"))).toBe("keep.txt");
  });

  it("nothing from a refused member on, and the archive is refused", async () => {
    const before: RawMember[] = [
      { path: "./", type: "5" },
      { path: "a", type: "0", body: body(2000, 0x61) },
    ];
    const archive = rawTar([...before, { path: "pipe", type: "6" }, { path: "b", type: "0", body: "after" }]);
    const { landed, extractorGot } = await feed(archive, "serial");
    expect(landed).toMatchObject({ code: "SYNC_ARCHIVE_UNSAFE" });
    const accepted = rawTar(before).subarray(0, -1024); // without the end-of-archive marker
    expect(extractorGot.equals(accepted)).toBe(true);
    await expect(fs.access(path.join(dir, "host", "target"))).rejects.toThrow();
  });

  it.each(["serial", "batched"] as const)("zeros after the end-of-archive marker are passed on only up to one record (%s)", async (how) => {
    const members: RawMember[] = [{ path: "f", type: "0", body: "x" }];
    const archive = Buffer.concat([rawTar(members), Buffer.alloc(1024 * 1024)]);
    const { landed, extractorGot } = await feed(archive, how);
    expect(landed).toMatchObject({ counts: { files: 1 } });
    expect(extractorGot.length).toBeLessThanOrEqual(rawTar(members).length + 10240);
    expect(extractorGot.subarray(0, rawTar(members).length).equals(rawTar(members))).toBe(true);
  });
});

describe("landing with node-tar (no GNU tar on the host)", () => {
  beforeEach(() => overrideSystemTar(null));
  afterEach(() => vi.restoreAllMocks());

  it("hands node-tar one chunk at a time: at most one 'drain' listener on its entry, however many chunks queued up", async () => {
    // node-tar adds a 'drain' listener to its current entry for every write it answers `false`:
    // writing a queued batch past that piles them up (MaxListenersExceededWarning in the host's log).
    let mostDrainListeners = 0;
    const on = ReadEntry.prototype.on;
    vi.spyOn(ReadEntry.prototype, "on").mockImplementation(function (this: ReadEntry, ...args: Parameters<typeof on>) {
      const result = on.apply(this, args);
      mostDrainListeners = Math.max(mostDrainListeners, this.listenerCount("drain"));
      return result;
    });
    const big = body(2 * 1024 * 1024, 0x61);
    const { landed } = await feed(rawTar([{ path: "big", type: "0", body: big }]), "batched");
    expect(landed).toMatchObject({ counts: { files: 1 } });
    expect((await fs.readFile(path.join(dir, "host", "target", "big"))).equals(big)).toBe(true);
    expect(mostDrainListeners).toBeGreaterThan(0); // the entry did push back, so the limit was tested
    expect(mostDrainListeners).toBeLessThanOrEqual(1);
  });
});

describe("landing with the host's tar", () => {
  beforeEach(() => overrideSystemTar(undefined));

  it("gives symlinks their archived time and leaves their directory's time as extracted", async () => {
    if ((await systemTar()) === null) return;
    const { landed } = await feed(
      rawTar([
        { path: "./", type: "5" },
        { path: "d", type: "5" },
        { path: "d/f", type: "0", body: "x" },
        { path: "d/l", type: "2", linkpath: "f" },
      ]),
      "serial",
    );
    expect(landed).toMatchObject({ counts: { files: 1 } });
    const target = path.join(dir, "host", "target");
    expect(await fs.readlink(path.join(target, "d/l"))).toBe("f");
    // rawTar stamps every member 1_700_000_000.
    expect(Math.floor((await fs.lstat(path.join(target, "d/l"))).mtimeMs / 1000)).toBe(1_700_000_000);
    expect(Math.floor((await fs.stat(path.join(target, "d"))).mtimeMs / 1000)).toBe(1_700_000_000);
  });

  it("refuses to land a file mapping on a host directory, leaving it as it was", async () => {
    const taken = path.join(dir, "host", "taken");
    await fs.mkdir(path.join(taken, "inside"), { recursive: true });
    const runner = cannedArchiveRunner(rawTar([{ path: "./f", type: "0", body: "x" }]));
    await expect(syncOut(runner, [{ operationId: "o", files: [{ sourcePath: "/ws/f", targetPath: taken, kind: "file" }] }], { roots: ["/ws"], hostScratchDir: dir })).rejects.toMatchObject({
      code: "SYNC_TARGET_INVALID",
    });
    expect(await fs.readdir(path.join(dir, "host"))).toEqual(["taken"]);
    expect(await fs.readdir(taken)).toEqual(["inside"]);
  });
});
