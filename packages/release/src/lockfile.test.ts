import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { lockfileProblems } from "./lockfile.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

describe("package-lock.json against the workspaces", () => {
  const copies: string[] = [];
  afterAll(() => copies.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  /** The repository's manifests and lock, copied, with one package.json changed. */
  function copyWith(dir: string, change: (manifest: Record<string, any>) => void): string {
    const root = mkdtempSync(path.join(os.tmpdir(), "lockfile-"));
    copies.push(root);
    cpSync(path.join(ROOT, "package.json"), path.join(root, "package.json"));
    cpSync(path.join(ROOT, "package-lock.json"), path.join(root, "package-lock.json"));
    const workspaces = (JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { workspaces: string[] }).workspaces;
    for (const ws of workspaces) cpSync(path.join(ROOT, ws, "package.json"), path.join(root, ws, "package.json"));
    const file = path.join(root, dir, "package.json");
    const manifest = JSON.parse(readFileSync(file, "utf8")) as Record<string, any>;
    change(manifest);
    writeFileSync(file, JSON.stringify(manifest, null, 2));
    return root;
  }

  it("the committed lock agrees with every package.json", () => {
    expect(lockfileProblems(ROOT)).toEqual([]);
  });

  it("a lock stale on engines.node (which npm ci installs from without a word) is reported", () => {
    const root = copyWith("providers/kubernetes", (m) => (m.engines = { node: ">=99.0.0" }));
    expect(lockfileProblems(root)).toEqual([
      'package-lock.json is stale for providers/kubernetes: engines is {"node":">=22.19.0"} there, {"node":">=99.0.0"} in its package.json (run npm install and commit package-lock.json)',
    ]);
  });

  it("so is a changed version, bin, dependency, or a workspace the lock does not know", () => {
    expect(lockfileProblems(copyWith("packages/cli", (m) => (m.version = "9.9.9")))).toEqual([
      expect.stringMatching(/^package-lock.json is stale for packages\/cli: version is "[^"]+" there, "9.9.9"/),
    ]);
    expect(lockfileProblems(copyWith("packages/cli", (m) => (m.bin = { other: "./bin/x.js" })))).toEqual([expect.stringMatching(/stale for packages\/cli: bin/)]);
    expect(lockfileProblems(copyWith("packages/kit", (m) => (m.dependencies = { ...m.dependencies, "left-pad": "1.3.0" })))).toEqual([expect.stringMatching(/stale for packages\/kit: dependencies/)]);
    const added = copyWith("packages/kit", () => undefined);
    const rootManifest = JSON.parse(readFileSync(path.join(added, "package.json"), "utf8")) as { workspaces: string[] };
    rootManifest.workspaces.push("packages/kit-two");
    writeFileSync(path.join(added, "package.json"), JSON.stringify(rootManifest));
    cpSync(path.join(added, "packages/kit/package.json"), path.join(added, "packages/kit-two/package.json"));
    expect(lockfileProblems(added)).toEqual(expect.arrayContaining([expect.stringMatching(/stale for the root package: workspaces/), expect.stringMatching(/no entry for packages\/kit-two/)]));
  });
});
