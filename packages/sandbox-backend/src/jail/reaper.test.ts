import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildReaper } from "./reaper.js";

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "reaper-"));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function install(arch: "x86_64" | "aarch64"): string {
  const file = path.join(dir, `reaper-${arch}`);
  fs.writeFileSync(file, buildReaper(arch), { mode: 0o555 });
  return file;
}

/** A subshell starts a sleep and exits: the orphaned sleep goes to the nearest subreaper. */
const ORPHAN_PARENT = `(sleep 2 & echo $! > "$1"); sleep 0.2; read p < "$1"; ppid=$(cut -d' ' -f4 /proc/$p/stat); kill $p; [ "$ppid" = $$ ] && echo "adopted by the command" || echo "adopted by $ppid"`;

function check(program: string, runner: string[] = [], adoptsOrphans = true) {
  const run = (args: string[]) => spawnSync(runner[0] ?? program, [...runner.slice(1), ...(runner.length ? [program] : []), ...args], { encoding: "utf8", timeout: 10_000 });
  // The command keeps its own argv[0], and the orphan of a process it started is re-parented to it.
  expect(run(["/bin/sh", "my-argv0", "-c", 'echo "$0"']).stdout).toBe("my-argv0\n");
  if (adoptsOrphans) expect(run(["/bin/sh", "sh", "-c", ORPHAN_PARENT, "sh", path.join(dir, "pid")]).stdout).toBe("adopted by the command\n");
  expect(run(["/bin/sh", "sh", "-c", "exit 7"]).status).toBe(7);
  expect(run(["/nonexistent/program", "x"]).status).toBe(127);
}

describe("the command reaper", () => {
  it("is a minimal static ELF64 executable per arch", () => {
    for (const arch of ["x86_64", "aarch64"] as const) {
      const elf = buildReaper(arch);
      expect(elf.subarray(0, 4).toString("latin1")).toBe("\x7fELF");
      expect(elf.readUInt16LE(56)).toBe(1);
      expect(elf.length).toBeLessThan(256);
    }
  });

  it.skipIf(process.arch !== "x64")("makes the command the subreaper of what it starts and execs it with its argv[0] (x86_64)", () => {
    check(install("x86_64"));
  });

  it.skipIf(process.arch !== "x64" || !fs.existsSync("/usr/bin/qemu-aarch64-static"))("does the same on aarch64 (under qemu-user)", () => {
    const program = install("aarch64");
    // qemu-user refuses PR_SET_CHILD_SUBREAPER itself (EINVAL): it shows the call the program makes.
    check(program, ["/usr/bin/qemu-aarch64-static"], false);
    const traced = spawnSync("/usr/bin/qemu-aarch64-static", ["-strace", program, "/bin/true", "true"], { encoding: "utf8" });
    expect(traced.stderr).toMatch(/prctl\(36,1,/);
    expect(traced.stderr).toMatch(/execve\("\/bin\/true",\{"true",NULL\}\)/);
  });
});
