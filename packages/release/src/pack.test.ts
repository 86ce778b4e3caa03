import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { formatChecksums, sha256File } from "./checksums.js";
import { packNormalized } from "./pack.js";
import { compareChecksumLists } from "./reproducible.js";
import type { PackageManifest } from "./workspace.js";

const tmp = mkdtempSync(path.join(os.tmpdir(), "release-pack-test-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const manifest: PackageManifest = {
  name: "@paperclip-sandbox/thing",
  version: "1.0.0",
  type: "module",
  bin: { thing: "./bin/thing.js" },
  files: ["bin", "dist", "!dist/.tsbuildinfo", "README.md", "LICENSE"],
};

/** The same package contents written in a given order, with given modes and mtimes. */
function writePackage(dir: string, order: string[], mode: number, mtime: Date): void {
  const files: Record<string, string> = {
    "package.json": JSON.stringify(manifest),
    "README.md": "# thing\n",
    LICENSE: "MIT\n",
    "bin/thing.js": "#!/usr/bin/env node\nimport('../dist/main.js');\n",
    "dist/main.js": "console.log('hi');\n",
    "dist/z/last.js": "export {};\n",
    "dist/a.js": "export {};\n",
    "dist/.tsbuildinfo": "{}", // excluded by files
  };
  for (const rel of order) {
    const file = path.join(dir, rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, files[rel] ?? "");
    chmodSync(file, mode);
    utimesSync(file, mtime, mtime);
  }
}

describe("packNormalized", () => {
  it("gives the same bytes whatever the files' modes, mtimes and creation order", async () => {
    const all = ["package.json", "README.md", "LICENSE", "bin/thing.js", "dist/main.js", "dist/z/last.js", "dist/a.js", "dist/.tsbuildinfo"];
    writePackage(path.join(tmp, "one"), all, 0o644, new Date("2020-01-01T00:00:00Z"));
    // as a working tree after `npm install` linked the bin and a rebuild rewrote dist
    writePackage(path.join(tmp, "two"), [...all].reverse(), 0o755, new Date());
    const a = await packNormalized(path.join(tmp, "one"), manifest, path.join(tmp, "work-one"));
    const b = await packNormalized(path.join(tmp, "two"), manifest, path.join(tmp, "work-two"));
    expect(sha256File(b.tarball)).toBe(sha256File(a.tarball));
    const listing = execFileSync("tar", ["-tvzf", a.tarball], { encoding: "utf8" });
    expect(listing).toMatch(/-rwxr-xr-x .* package\/bin\/thing\.js/);
    expect(listing).toMatch(/-rw-r--r-- .* package\/dist\/main\.js/);
    expect(listing).not.toContain(".tsbuildinfo");
    expect(
      new Set(
        listing
          .trim()
          .split("\n")
          .map((l) => l.split(/\s+/).slice(3, 5).join(" ")),
      ),
    ).toEqual(new Set(["1985-10-26 08:15"]));
  });
});

describe("checksum list", () => {
  it("is sha256sum's format, sorted by name, and checks with sha256sum -c", () => {
    const dir = path.join(tmp, "sums");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "b.tgz"), "b");
    writeFileSync(path.join(dir, "a.tgz"), "a");
    const text = formatChecksums(["b.tgz", "a.tgz"].map((file) => ({ file, sha256: sha256File(path.join(dir, file)) })));
    expect(text.split("\n")[0]).toMatch(/^[0-9a-f]{64} {2}a\.tgz$/);
    writeFileSync(path.join(dir, "SHA256SUMS"), text);
    expect(execFileSync("sha256sum", ["-c", "--strict", "SHA256SUMS"], { cwd: dir, encoding: "utf8" })).toBe("a.tgz: OK\nb.tgz: OK\n");
    expect(readFileSync(path.join(dir, "SHA256SUMS"), "utf8")).toBe(text);
  });

  it("reports every tarball that differs or is missing between two packs", () => {
    const x = "1".repeat(64);
    const y = "2".repeat(64);
    expect(compareChecksumLists(`${x}  a.tgz\n${x}  b.tgz\n`, `${x}  a.tgz\n${y}  b.tgz\n${x}  c.tgz\n`)).toEqual([`b.tgz: ${x} then ${y}`, "c.tgz: only in the second pack"]);
    expect(compareChecksumLists(`${x}  a.tgz\n`, `${x}  a.tgz\n`)).toEqual([]);
  });
});
