import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TarParser, type TarMember } from "./tar-parse.js";
import { systemTar } from "./system-tar.js";

/**
 * The strict parser accepts GNU tar's own sparse members (`--format=gnu --sparse`: type S, old GNU
 * sparse map, extension blocks) and nothing looser. Fixtures are made by the host's GNU tar.
 */
const gnuTar = await systemTar();
const KiB = 1024;
const MiB = 1024 * KiB;

let dir: string;
/**
 * Maps: `two`: 2 data regions and the end entry (a slot unused); `few`: 3 and the end entry (the
 * header full); `many`: 26 regions (two extension blocks).
 */
const archives = { two: Buffer.alloc(0), few: Buffer.alloc(0), many: Buffer.alloc(0) };

async function sparseFile(file: string, size: number, regions: number[]): Promise<void> {
  const handle = await fs.open(file, "wx");
  try {
    for (const at of regions) await handle.write(Buffer.alloc(4 * KiB, 1 + (at % 250)), 0, 4 * KiB, at);
    await handle.truncate(size);
  } finally {
    await handle.close();
  }
}

const pack = (...names: string[]) =>
  execFileSync("tar", ["-c", "-f", "-", "--format=gnu", "--sparse", ...names], { cwd: dir, maxBuffer: 64 * MiB, env: { PATH: process.env.PATH ?? "", LC_ALL: "C" } });

beforeAll(async () => {
  if (gnuTar === null) return;
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "tar-sparse-test-"));
  await sparseFile(path.join(dir, "two"), 64 * MiB, [0, 32 * MiB]);
  await sparseFile(path.join(dir, "few"), 64 * MiB, [0, 32 * MiB, 40 * MiB]);
  await sparseFile(
    path.join(dir, "many"),
    64 * MiB,
    Array.from({ length: 26 }, (_, i) => (2 * i + 1) * MiB),
  );
  await fs.writeFile(path.join(dir, "after"), "after");
  archives.two = pack("./two", "./after");
  archives.few = pack("./few", "./after");
  archives.many = pack("./many", "./after");
});
afterAll(async () => {
  if (dir !== undefined) await fs.rm(dir, { recursive: true, force: true });
});

function parse(archive: Buffer, gnuSparse = true, chunk = 700): TarMember[] {
  const members: TarMember[] = [];
  const parser = new TarParser((m) => members.push(m), { gnuSparse });
  for (let i = 0; i < archive.length; i += chunk) parser.write(archive.subarray(i, i + chunk));
  parser.end();
  return members;
}

/** A copy of `archive` with its first header changed by `edit`, checksum recomputed. */
function editHeader(archive: Buffer, edit: (h: Buffer) => void, at = 0): Buffer {
  const copy = Buffer.from(archive);
  const h = copy.subarray(at, at + 512);
  edit(h);
  h.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
  return copy;
}
const octal = (h: Buffer, offset: number, value: number) => h.write(`${value.toString(8).padStart(11, "0")}\0`, offset, 12, "latin1");
const readOctal = (h: Buffer, offset: number) => parseInt(h.toString("latin1", offset, offset + 11), 8);
/** Header offset of sparse entry `i` (0..3) or of the real size. */
const entry = (i: number) => 386 + 24 * i;
const REALSIZE = 483;
const ISEXTENDED = 482;

describe.skipIf(gnuTar === null)("GNU sparse members", () => {
  it("accepts GNU tar's sparse form, with the map in the header or in extension blocks", () => {
    for (const [name, archive, regions, extensions] of [
      ["two", archives.two, 2, 0],
      ["few", archives.few, 3, 0],
      ["many", archives.many, 26, 2],
    ] as const) {
      const members = parse(archive);
      expect(members.map((m) => [m.path, m.type])).toEqual([
        [`./${name}`, "GNUSparseFile"],
        ["./after", "File"],
      ]);
      const [sparse, after] = members as [TarMember, TarMember];
      expect(sparse.realSize).toBe(64 * MiB);
      expect(sparse.size).toBe(regions * 4 * KiB);
      expect(sparse.end).toBe(512 * (1 + extensions) + regions * 4 * KiB);
      expect(after.start).toBe(sparse.end);
      expect(after.size).toBe(5);
    }
  });

  it("accepts a map that ends with data instead of an end entry (GNU tar's raw hole detection)", () => {
    const dataLast = editHeader(archives.few, (h) => {
      const end = readOctal(h, entry(2)) + readOctal(h, entry(2) + 12);
      h.fill(0, entry(3), entry(4));
      octal(h, REALSIZE, end);
    });
    expect(parse(dataLast)[0]).toMatchObject({ type: "GNUSparseFile", realSize: 40 * MiB + 4 * KiB, size: 3 * 4 * KiB });
  });

  it("refuses sparse members unless asked to accept them", () => {
    expect(() => parse(archives.few, false)).not.toThrow(); // parsed as an unsupported type the inspector refuses
    expect(parse(archives.few, false)[0]?.type).toBe('Unsupported("S")');
    expect(() => parse(archives.many, false)).toThrow(expect.objectContaining({ code: "TAR_BAD_ARCHIVE" }));
  });

  const refusals: [string, () => Buffer][] = [
    ["POSIX magic", () => editHeader(archives.few, (h) => h.write("ustar\u000000", 257, 8, "latin1"))],
    ["a map that does not add up to the size", () => editHeader(archives.few, (h) => octal(h, 124, readOctal(h, 124) - 512))],
    ["an end entry before the real size", () => editHeader(archives.few, (h) => octal(h, REALSIZE, readOctal(h, REALSIZE) + 4096))],
    [
      "a map that ends before the real size",
      () =>
        editHeader(archives.few, (h) => {
          h.fill(0, entry(3), entry(4));
          octal(h, REALSIZE, 64 * MiB);
        }),
    ],
    ["an entry past the real size", () => editHeader(archives.few, (h) => octal(h, REALSIZE, readOctal(h, REALSIZE) - 4096))],
    [
      "entries out of order",
      () =>
        editHeader(archives.few, (h) => {
          const first = Buffer.from(h.subarray(entry(0), entry(1)));
          h.copy(h, entry(0), entry(1), entry(2));
          first.copy(h, entry(1));
        }),
    ],
    ["overlapping entries", () => editHeader(archives.few, (h) => octal(h, entry(1), readOctal(h, entry(0)) + 1024))],
    ["a zero-length entry before the end", () => editHeader(archives.few, (h) => octal(h, entry(1) + 12, 0))],
    ["garbage in an unused entry", () => editHeader(archives.two, (h) => h.write("1", entry(3), 1, "latin1"))],
    ["isextended after an empty entry", () => editHeader(archives.two, (h) => (h[ISEXTENDED] = 1))],
    ["isextended that is neither 0 nor 1", () => editHeader(archives.many, (h) => (h[ISEXTENDED] = 2))],
    [
      "stray bytes at the end of an extension block",
      () => {
        const copy = Buffer.from(archives.many);
        copy[512 + 510] = 1;
        return copy;
      },
    ],
    [
      "an empty extension block",
      () => {
        const copy = Buffer.from(archives.many);
        copy.fill(0, 512, 1024);
        return copy;
      },
    ],
    ["a truncated map", () => archives.many.subarray(0, 512 + 300)],
    [
      "a pax header before it",
      () => {
        const rec = "20 path=./few-named\n";
        const body = Buffer.concat([Buffer.from(rec), Buffer.alloc(512 - rec.length)]);
        const head = editHeader(Buffer.from(archives.few.subarray(0, 512)), (h) => {
          h.fill(0, 0, 100);
          h.write("././@PaxHeader", 0, "latin1");
          h[156] = "x".charCodeAt(0);
          h.write("ustar\u000000", 257, 8, "latin1");
          octal(h, 124, rec.length);
          h.fill(0, 345, 512);
        });
        return Buffer.concat([head, body, archives.few]);
      },
    ],
  ];
  /** The check each case must trip (not just any refusal). */
  const reasons: Record<string, string> = {
    "POSIX magic": "not in GNU tar's form",
    "a map that does not add up to the size": "does not add up to its size",
    "an end entry before the real size": "empty sparse map entry before the real size",
    "a map that ends before the real size": "does not end at its real size",
    "an entry past the real size": "out of order or out of range",
    "entries out of order": "out of order or out of range",
    "overlapping entries": "out of order or out of range",
    "a zero-length entry before the end": "empty sparse map entry before the real size",
    "garbage in an unused entry": "malformed sparse map entry",
    "isextended after an empty entry": "extended after an empty entry",
    "isextended that is neither 0 nor 1": "malformed sparse extension flag",
    "stray bytes at the end of an extension block": "has stray bytes",
    "an empty extension block": "extension block at byte 512 is empty",
    "a truncated map": "truncated",
    "a pax header before it": "not in GNU tar's form",
  };
  it.each(refusals)("refuses %s", (label, make) => {
    expect(() => parse(make())).toThrow(expect.objectContaining({ code: "TAR_BAD_ARCHIVE", message: expect.stringContaining(reasons[label] as string) }));
  });
});
