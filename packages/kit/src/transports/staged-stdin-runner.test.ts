import { mkdtemp, mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLocalScriptRunner } from "../exec/local/local-runner.js";
import type { ScriptRunner } from "../transport.js";
import { withStagedStdin } from "./staged-stdin-runner.js";

let base: string;
beforeEach(async () => {
  base = await mkdtemp(join(tmpdir(), "staged-stdin-"));
});
afterEach(() => rm(base, { recursive: true, force: true }));

/** A local runner whose "file API" writes the host's file system, recording each staging. */
function staged(threshold = 0) {
  const inner = createLocalScriptRunner({ cwd: base, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  const stagings: Array<{ dir: string; path: string; bytes: number }> = [];
  const runner = withStagedStdin(inner, {
    thresholdBytes: threshold,
    baseDir: base,
    async stage(target, bytes) {
      stagings.push({ ...target, bytes: bytes.length });
      await mkdir(target.dir, { mode: 0o700 });
      await writeFile(target.path, bytes, { mode: 0o600 });
    },
  });
  return { runner, stagings };
}

async function run(runner: ScriptRunner, script: string, stdin: string | Buffer | Readable | null) {
  const out: Buffer[] = [];
  const exit = await runner.run(script, { stdin, stdout: (c) => out.push(c) });
  return { exit, stdout: Buffer.concat(out).toString() };
}

describe("withStagedStdin", () => {
  it("stages known stdin as a 0600 file the command reads as its stdin, removed before the command runs", async () => {
    const { runner, stagings } = staged();
    const r = await run(runner, `stat -L -c %a /proc/self/fd/0; ls -A ${base} | wc -l; cat`, "hello stdin");
    expect(r.exit.exitCode).toBe(0);
    expect(r.stdout).toBe("600\n0\nhello stdin");
    expect(stagings).toEqual([{ dir: expect.stringMatching(new RegExp(`^${base}/\\.paperclip-stdin\\.[0-9a-f]{24}$`)), path: expect.stringMatching(/\/stdin$/), bytes: 11 }]);
    expect(await readdir(base)).toEqual([]);
  });

  it("passes small stdin (up to the threshold), empty stdin and streams to the inner runner", async () => {
    const { runner, stagings } = staged(16);
    expect((await run(runner, "cat", "under sixteen")).stdout).toBe("under sixteen");
    expect((await run(runner, "wc -c", "")).stdout.trim()).toBe("0");
    expect((await run(runner, "cat", Readable.from([Buffer.from("streamed, of any size")]))).stdout).toBe("streamed, of any size");
    expect(stagings).toEqual([]);
  });

  it("a staging that fails leaves nothing and fails the run", async () => {
    const inner = createLocalScriptRunner({ cwd: base, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    const runner = withStagedStdin(inner, {
      baseDir: base,
      async stage(target) {
        await mkdir(target.dir, { mode: 0o700 });
        throw new Error("upload refused");
      },
    });
    await expect(run(runner, "cat", "x")).rejects.toThrow("upload refused");
    expect(await readdir(base)).toEqual([]);
  });

  it("a staged file that cannot be opened fails the command with 125, never runs it without its stdin", async () => {
    const inner = createLocalScriptRunner({ cwd: base, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    const runner = withStagedStdin(inner, { baseDir: base, stage: async () => undefined });
    const r = await run(runner, "echo ran", "lost");
    expect(r.exit.exitCode).toBe(125);
    expect(r.stdout).toBe("");
    expect(await readdir(base)).toEqual([]);
  });
});
