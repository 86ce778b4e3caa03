import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { packageVersionOf } from "./package-version.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), "pkg-version-"));
  dirs.push(root);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), text);
  }
  return root;
}

describe("packageVersionOf", () => {
  it("reads the version of the nearest named package.json above the module", () => {
    const root = tree({
      "package.json": JSON.stringify({ name: "@x/plugin-y", version: "1.4.2-rc.1" }),
      // a nameless package.json (e.g. {"type":"module"} in a build folder) is not the package
      "dist/package.json": JSON.stringify({ type: "module" }),
      "dist/manifest.js": "",
    });
    const url = `${pathToFileURL(path.join(root, "dist", "manifest.js")).href}?mtime=123`; // as the host imports it
    expect(packageVersionOf(url)).toBe("1.4.2-rc.1");
  });

  it("refuses a package.json without a version, naming the file", () => {
    const root = tree({ "package.json": JSON.stringify({ name: "x" }), "dist/m.js": "" });
    expect(() => packageVersionOf(pathToFileURL(path.join(root, "dist", "m.js")).href)).toThrow(`${path.join(root, "package.json")}: no "version"`);
  });
});
