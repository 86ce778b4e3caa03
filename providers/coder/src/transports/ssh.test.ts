// The ssh transport's CLI config directory belongs to the worker: made on first use, removed by the
// plugin's shutdown hook (the host's shutdown call before it ends a worker).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createCoderPlugin } from "../plugin.js";
import { cliEnv } from "./ssh.js";

const quiet = () => undefined;
const context = { logger: { info: quiet, warn: quiet, error: quiet, debug: quiet }, execution: { log: quiet } } as unknown as PluginContext;
const target = { coderUrl: "https://coder.example.com", token: "not-a-real-token", env: {} };

describe("the coder CLI's config directory", () => {
  let parent: string;
  let saved: string | undefined;
  beforeEach(async () => {
    parent = await mkdtemp(join(tmpdir(), "coder-cli-dir-"));
    saved = process.env.TMPDIR;
    process.env.TMPDIR = parent;
  });
  afterEach(async () => {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
    await rm(parent, { recursive: true, force: true });
  });

  it("is gone after the worker's shutdown, and made again by a later command", async () => {
    const { definition } = createCoderPlugin();
    await definition.setup(context);
    const dir = cliEnv(target).CODER_CONFIG_DIR!;
    expect(dir.startsWith(`${parent}/paperclip-coder-cli-`)).toBe(true);
    expect(cliEnv(target).CODER_CONFIG_DIR).toBe(dir);
    expect(existsSync(dir)).toBe(true);

    await definition.onShutdown!();
    expect(await readdir(parent)).toEqual([]);

    const again = cliEnv(target).CODER_CONFIG_DIR!;
    expect(existsSync(again)).toBe(true);
    await definition.onShutdown!();
    expect(await readdir(parent)).toEqual([]);
  });

  it("a killed worker's directory (no shutdown, no exit handler) is removed by the next worker that makes one", async () => {
    const { definition } = createCoderPlugin();
    await definition.setup(context);
    // A pid that has exited (a process that ran and was reaped), and one that lives (the test runner's parent).
    const deadPid = spawnSync(process.execPath, ["-e", ""]).pid!;
    const killed = join(parent, `paperclip-coder-cli-${deadPid}-AbC123`);
    const alive = join(parent, `paperclip-coder-cli-${process.ppid}-XyZ789`);
    await mkdir(killed);
    await mkdir(alive);

    const dir = cliEnv(target).CODER_CONFIG_DIR!;
    expect(existsSync(killed)).toBe(false);
    expect(existsSync(alive)).toBe(true);
    expect(existsSync(dir)).toBe(true);
    await definition.onShutdown!();
    expect(await readdir(parent)).toEqual([`paperclip-coder-cli-${process.ppid}-XyZ789`]);
  });
});
