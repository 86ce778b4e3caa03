import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPrelude, installPrelude } from "./prelude.js";

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "prelude-"));
  fs.chmodSync(dir, 0o755);
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs `program` (natively, or under qemu for another arch) with fds 9, 12 and 40 open; returns the fds its command has and its exit. */
function runPrelude(program: string, runner: string[] = []): { fds: string; code: number | null } {
  const fd = fs.openSync("/dev/null", "r");
  try {
    const stdio = ["ignore", "pipe", "pipe", ...Array<"ignore">(6).fill("ignore"), fd, "ignore", "ignore", fd, ...Array<"ignore">(27).fill("ignore"), fd] as const;
    const result = spawnSync(runner[0] ?? program, [...runner.slice(1), ...(runner.length ? [program] : []), "/bin/sh", "-c", "ls /proc/$$/fd | sort -n | tr '\\n' ' '; exit 7"], {
      stdio: stdio as unknown as Array<"ignore" | "pipe" | number>,
      encoding: "utf8",
    });
    return { fds: result.stdout.trim(), code: result.status };
  } finally {
    fs.closeSync(fd);
  }
}

/** fd 9 kept, 12 and 40 gone (whatever spawnSync itself leaves below 10 is the caller's). */
function expectOnlyLowDescriptors(outcome: { fds: string; code: number | null }): void {
  const fds = outcome.fds.split(" ").map(Number);
  expect(fds).toContain(9);
  expect(fds.filter((fd) => fd >= 10)).toEqual([]);
  expect(outcome.code).toBe(7);
}

describe("the jail prelude", () => {
  it("is a minimal static ELF64 executable per arch", () => {
    for (const [arch, machine] of [
      ["x86_64", 62],
      ["aarch64", 183],
    ] as const) {
      const elf = buildPrelude(arch);
      expect(elf.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
      expect(elf.readUInt16LE(18)).toBe(machine);
      expect(elf.readUInt16LE(56)).toBe(1); // one segment, no interpreter
      expect(elf.length).toBeLessThan(512);
    }
  });

  it.skipIf(process.arch !== "x64")("closes every descriptor from 10 up, keeps 0-9, and execs its arguments (x86_64)", async () => {
    const program = await installPrelude(dir, "x86_64");
    expect(fs.statSync(program).mode & 0o777).toBe(0o555);
    expect(await installPrelude(dir, "x86_64")).toBe(program);
    expectOnlyLowDescriptors(runPrelude(program));
  });

  it.skipIf(process.arch !== "x64" || !fs.existsSync("/usr/bin/qemu-aarch64-static"))("does the same on aarch64 (under qemu-user)", async () => {
    const program = await installPrelude(dir, "aarch64");
    expectOnlyLowDescriptors(runPrelude(program, ["/usr/bin/qemu-aarch64-static"]));
  });

  it.skipIf(process.arch !== "x64" || process.getuid?.() !== 0)("becomes the jail's host user (no groups, gid, uid) before anything else, or exits 126", async () => {
    const program = await installPrelude(dir, "x86_64", { uid: 2_000_000_000, gid: 2_000_000_001 });
    const who = spawnSync(program, ["/bin/sh", "-c", "grep -E '^(Uid|Gid|Groups|CapEff):' /proc/self/status"], { encoding: "utf8" });
    expect(who.stdout.split("\n").map((line) => line.replace(/\s+/g, " ").trim())).toEqual([
      "Uid: 2000000000 2000000000 2000000000 2000000000",
      "Gid: 2000000001 2000000001 2000000001 2000000001",
      "Groups:",
      "CapEff: 0000000000000000",
      "",
    ]);
    // Not root (here: nobody) it cannot switch, and starts nothing.
    expect(spawnSync(program, ["/bin/true"], { uid: 65534, gid: 65534 }).status).toBe(126);
  });

  it.skipIf(process.arch !== "x64")("exits 127 when it cannot exec", async () => {
    const program = await installPrelude(dir, "x86_64");
    expect(spawnSync(program, ["/nonexistent/program"]).status).toBe(127);
    expect(spawnSync(program, []).status).toBe(127);
  });
});
