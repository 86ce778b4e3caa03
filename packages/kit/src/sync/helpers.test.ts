import { describe, expect, it } from "vitest";
import { BoundedTail } from "./bounded-tail.js";
import { compileExcludes, sandboxSafeExcludes } from "./exclude-glob.js";
import { normalizeMemberPath, resolveSymlinkMember } from "./member-path.js";
import { confineSandboxPath } from "./sandbox-path.js";
import { shellQuote as quote } from "../exec/quote.js";
import { execFileSync } from "node:child_process";

describe("exclude globs", () => {
  const m = compileExcludes(["*.log", "node_modules", "build/**", "a?c", "/top", "**/cache/*.bin", "docs/*.md"]);
  it.each([
    ["x.log", true],
    ["deep/er/x.log", true],
    ["node_modules", true],
    ["pkg/node_modules/dep/index.js", true],
    ["build/out/x", true],
    ["build", false], // "build/**" matches what is inside, like .gitignore
    ["abc", true],
    ["abbc", false],
    ["a/c", false],
    ["top", true],
    ["sub/top", false],
    ["cache/x.bin", true],
    ["a/b/cache/x.bin", true],
    ["a/b/cache/sub/x.bin", false],
    ["docs/a.md", true],
    ["docs/sub/a.md", false],
    ["src/app.ts", false],
  ])("%s excluded: %s", (p, expected) => {
    expect(m.excludes(p)).toBe(expected);
  });

  it("only hands the sandbox tar patterns it interprets the same way", () => {
    expect(sandboxSafeExcludes(["*.log", "node_modules", ".git", "*cache*", "a?c", "a*b", "build/**", "*", ".*", "-x", "[ab]"])).toEqual(["*.log", "node_modules", ".git", "*cache*"]);
  });
});

describe("tar member paths", () => {
  it("normalizes and rejects escapes", () => {
    expect(normalizeMemberPath("./a//b/./c")).toBe("a/b/c");
    expect(normalizeMemberPath("./")).toBe("");
    expect(normalizeMemberPath("a/../b")).toBeNull();
    expect(normalizeMemberPath("/etc/passwd")).toBeNull();
    expect(normalizeMemberPath("a\0b")).toBeNull();
  });

  it("resolves symlinks physically through other symlink members", () => {
    const links = new Map([
      ["s", "."],
      ["deep/up", "../.."],
      ["x/y", "../z"],
    ]);
    expect(resolveSymlinkMember("x/y", "../z", links)).toBe("inside");
    expect(resolveSymlinkMember("l", "s/..", links)).toBe("escapes");
    expect(resolveSymlinkMember("l", "s/s/s/a", links)).toBe("inside");
    expect(resolveSymlinkMember("deep/up", "../..", links)).toBe("escapes");
    expect(resolveSymlinkMember("a", "/abs", links)).toBe("escapes");
    expect(
      resolveSymlinkMember(
        "loop",
        "loop2",
        new Map([
          ["loop", "loop2"],
          ["loop2", "loop"],
        ]),
      ),
    ).toBe("loop");
  });
});

describe("sandbox paths (host-side check)", () => {
  it("splits a confined path into root, parent components and name", () => {
    expect(confineSandboxPath("/work/a/b/c.txt", ["/other", "/work", "/work/a"], "p")).toEqual({
      path: "/work/a/b/c.txt",
      root: "/work/a",
      parentComponents: ["b"],
      name: "c.txt",
    });
    expect(confineSandboxPath("/x/y", ["/"], "p")).toMatchObject({ root: "/", parentComponents: ["x"], name: "y" });
  });

  it.each([
    ["/work/../etc", "SYNC_PATH_INVALID"],
    ["/work/a/", "SYNC_PATH_INVALID"],
    ["work/a", "SYNC_PATH_INVALID"],
    ["/work/a\nb", "SYNC_PATH_INVALID"],
    ["/workspace/a", "SYNC_PATH_OUTSIDE_ROOT"],
    ["/etc/passwd", "SYNC_PATH_OUTSIDE_ROOT"],
  ])("refuses %j", (p, code) => {
    expect(() => confineSandboxPath(p, ["/work"], "p")).toThrow(expect.objectContaining({ code }));
  });
});

describe("shell quoting and bounded tails", () => {
  it("quotes anything so sh reads it back verbatim", () => {
    for (const value of ["plain", "it's", "$(rm -rf /)", "a\nb", "`x`", "ü ñ", "'", "", "-n"]) {
      const echoed = execFileSync("sh", ["-c", `printf '%s' ${quote(value)}`]).toString();
      expect(echoed).toBe(value);
    }
  });

  it("keeps only the last bytes", () => {
    const tail = new BoundedTail(10);
    for (let i = 0; i < 100; i++) tail.push(Buffer.from(`${i % 10}`));
    expect(tail.text()).toBe("0123456789");
    expect(tail.droppedBytes).toBe(90);
  });
});
