import fs from "node:fs/promises";
import path from "node:path";
import type { PluginPostUploadCommand } from "@paperclipai/plugin-sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SyncError, syncIn } from "./index.js";
import { listTree, makeWorld, type World } from "./__fixtures__/world.js";

let w: World;
let source: string;
beforeEach(async () => {
  w = await makeWorld();
  source = path.join(w.host, "payload.txt");
  await fs.writeFile(source, "payload");
});
afterEach(async () => {
  await w.cleanup();
});

function run(commands: PluginPostUploadCommand[], roots = [w.root]) {
  return syncIn(w.runner, [{ operationId: "op", files: [{ sourcePath: source, targetPath: path.join(w.root, "payload.txt"), kind: "file" }], postUploadCommands: commands }], { roots });
}

const log = () => fs.readFile(path.join(w.root, "log"), "utf8").catch(() => "");

describe("postUploadCommands", () => {
  it("run after the files land, in order, in the first root by default", async () => {
    await run([{ command: "cat payload.txt > log" }, { command: "pwd -P >> log" }, { command: "echo third >> log" }]);
    expect(await log()).toBe(`payload${w.root}\nthird\n`);
  });

  it("run verbatim: quotes, $, newlines and unicode reach the shell untouched", async () => {
    const command = `printf '%s|' "it's" '$HOME' "ünï" >> log\nprintf 'line2\\n' >> log`;
    await run([{ command }]);
    expect(await log()).toBe("it's|$HOME|ünï|line2\n");
  });

  it("see a clean shell: neither the helper functions nor the command's env variable", async () => {
    await run([{ command: 'echo "[${PAPERCLIP_POST_UPLOAD_COMMAND-unset}] $(command -v pc_enter || echo none)" > log' }]);
    expect(await log()).toBe("[unset] none\n");
  });

  it("see none of the prologue's variables (resolved roots, loop state)", async () => {
    await run([{ command: 'echo "[${pc_nl+set}${pc_roots+set}${pc_rest+set}${pc_here+set}${pc_real+set}]" > log' }]);
    expect(await log()).toBe("[]\n");
  });

  it("stop at the first failure with the exit code and a stderr tail, never the command text", async () => {
    const error = (await run([{ command: "echo one >> log" }, { command: "echo 'TOKEN=hunter2 is secret' > /dev/null; echo broken-step >&2; exit 3" }, { command: "echo three >> log" }]).then(
      () => undefined,
      (e: unknown) => e,
    )) as SyncError;
    expect(error).toBeInstanceOf(SyncError);
    expect(error).toMatchObject({ code: "SYNC_COMMAND_FAILED", exitCode: 3, operationId: "op" });
    expect(error.message).toContain("post-upload command 2 of 3");
    expect(error.message).toContain("broken-step");
    expect(error.message).not.toContain("hunter2");
    expect(await log()).toBe("one\n");
  });

  it("honour timeoutMs by ending the command's whole process group", async () => {
    const started = Date.now();
    await expect(run([{ command: "sleep 30 & sleep 30; echo late >> log", timeoutMs: 300 }])).rejects.toMatchObject({
      code: "SYNC_COMMAND_FAILED",
    });
    // A bound far from the alternative (a slow machine is not a failure): without the timeout the command runs 60 s.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await log()).toBe("");
  });

  it("run in a cwd inside a root, and refuse a cwd outside (lexically or via a symlink)", async () => {
    await fs.mkdir(path.join(w.root, "sub"));
    await run([{ command: "pwd -P > ../log", cwd: path.join(w.root, "sub") }]);
    expect(await log()).toBe(`${path.join(w.root, "sub")}\n`);

    await expect(run([{ command: "touch pwned", cwd: w.outside }])).rejects.toMatchObject({ code: "SYNC_PATH_OUTSIDE_ROOT" });
    await fs.symlink(w.outside, path.join(w.root, "escape"));
    await expect(run([{ command: "touch pwned", cwd: path.join(w.root, "escape") }])).rejects.toMatchObject({
      code: "SYNC_PATH_OUTSIDE_ROOT",
    });
    await expect(run([{ command: "touch pwned", cwd: `${w.root}/../outside` }])).rejects.toMatchObject({ code: "SYNC_PATH_INVALID" });
    expect(await listTree(w.outside)).toEqual([]);
  });

  it("default to the first root even when several are configured", async () => {
    const second = path.join(w.base, "second-root");
    await fs.mkdir(second);
    await run([{ command: "pwd -P > log" }], [w.root, second]);
    expect(await log()).toBe(`${w.root}\n`);
  });
});
