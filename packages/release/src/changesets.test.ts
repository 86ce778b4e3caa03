import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { changesetPackages, changesetProblems, isPublishedChange } from "./changesets.js";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function repo(files: Record<string, string>): { root: string; commit(message: string, more?: Record<string, string>): void } {
  const root = mkdtempSync(path.join(os.tmpdir(), "changesets-"));
  made.push(root);
  const write = (more: Record<string, string>) => {
    for (const [file, text] of Object.entries(more)) {
      mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
      writeFileSync(path.join(root, file), text);
    }
  };
  const run = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: root, stdio: "ignore" });
  run("init", "-q");
  const commit = (message: string, more: Record<string, string> = {}) => {
    write(more);
    run("add", "-A");
    run("commit", "-q", "--allow-empty", "-m", message);
  };
  commit("start", files);
  return { root, commit };
}

const pkg = (name: string, isPrivate = false) => JSON.stringify({ name, version: "0.1.0", ...(isPrivate ? { private: true } : {}) });
const changeset = (...names: string[]) => `---\n${names.map((n) => `"${n}": minor`).join("\n")}\n---\n\nWhat changed.\n`;

describe("the changeset check", () => {
  it("reads the package names of a changeset's front matter", () => {
    expect(changesetPackages(`---\n"@s/a": minor\n'@s/b': patch\n@s/c: major\n---\n\n"@s/d": minor\n`)).toEqual(["@s/a", "@s/b", "@s/c"]);
    expect(changesetPackages("no front matter")).toEqual([]);
  });

  it("counts source and package.json as published, not tests, fixtures or docs", () => {
    expect(isPublishedChange("src/plugin.ts")).toBe(true);
    expect(isPublishedChange("package.json")).toBe(true);
    expect(isPublishedChange("bridge/src/index.ts")).toBe(true);
    expect(isPublishedChange("src/plugin.test.ts")).toBe(false);
    expect(isPublishedChange("src/__fixtures__/a.ts")).toBe(false);
    expect(isPublishedChange("README.md")).toBe(false);
  });

  it("before the first release, a public package no changeset names is refused; a private one is not", () => {
    const { root } = repo({
      "providers/a/package.json": pkg("@s/plugin-a"),
      "providers/b/package.json": pkg("@s/plugin-b"),
      "emulators/e/package.json": pkg("@s/emu", true),
      ".changeset/one.md": changeset("@s/plugin-a"),
    });
    const problems = changesetProblems(root);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^@s\/plugin-b \(providers\/b\) changed and it has never been released, but no changeset/);
  });

  it("after a release, only a package whose published files changed needs one", () => {
    const { root, commit } = repo({ "providers/a/package.json": pkg("@s/plugin-a"), "providers/b/package.json": pkg("@s/plugin-b") });
    commit("release", { "providers/a/CHANGELOG.md": "# 0.1.0\n", "providers/b/CHANGELOG.md": "# 0.1.0\n" });
    commit("tests and docs only", { "providers/a/src/x.test.ts": "", "providers/b/README.md": "docs" });
    expect(changesetProblems(root)).toEqual([]);
    commit("a fix", { "providers/b/src/plugin.ts": "export {};" });
    expect(changesetProblems(root)).toEqual([expect.stringMatching(/^@s\/plugin-b \(providers\/b\) changed since the last release \([0-9a-f]{12}\)/)]);
    commit("described", { ".changeset/fix.md": changeset("@s/plugin-b") });
    expect(changesetProblems(root)).toEqual([]);
  });
});
