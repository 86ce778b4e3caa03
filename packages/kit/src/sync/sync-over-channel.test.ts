// Sync over a lease's command channel: where the file API is preferred (envd), a small archive
// moves over the channel while it is ready, at no vendor call, instead of through the file API. The channel is the real one
// over local processes (the world's runner stands in for the vendor's exec); its faults are real.
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { randomUUID } from "node:crypto";
import type { PluginSyncOperation } from "@paperclipai/plugin-sdk";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { endMarkedProcesses } from "../exec/local/process-marker.js";
import type { ScriptRunner } from "../transport.js";
import { cuttable } from "../transports/command-channel/__fixtures__/cuttable.js";
import { closeCommandChannel, commandChannelCarriesSync, commandChannelStatus, SYNC_CHANNEL_SWITCH, withCommandChannel } from "../transports/command-channel/index.js";
import { createTestFileTransport } from "./__fixtures__/local-files.js";
import { createTestScriptRunner, type RecordingRunner } from "./__fixtures__/local-runner.js";
import { listTree, makeWorld, modeOf, pseudoRandomBytes, type World } from "./__fixtures__/world.js";
import { syncFor } from "./index.js";

const MARKER = "PAPERCLIP_SYNC_CHANNEL_TEST";
let w: World;
let lease: string;
let vendor: RecordingRunner;

beforeEach(async () => {
  w = await makeWorld();
  lease = `lease-${randomUUID()}`;
  // The "vendor exec": every call recorded, every process marked with the lease.
  vendor = createTestScriptRunner(w.root, { TMPDIR: w.sandboxTmp, [MARKER]: lease });
});
afterEach(async () => {
  vi.unstubAllEnvs();
  await closeCommandChannel(lease);
  await endMarkedProcesses(MARKER, lease);
  await w.cleanup();
});

function channelOver(inner: ScriptRunner): ScriptRunner {
  return withCommandChannel(inner, { lease, restartDelayMs: 0, ackTimeoutMs: 5_000 });
}

/** The lease's first command (a vendor exec) starts the channel; wait until it is ready. */
async function warm(runner: ScriptRunner): Promise<number> {
  expect((await runner.run("true", {})).exitCode).toBe(0);
  await vi.waitFor(() => expect(commandChannelStatus(lease).state).toBe("ready"), { timeout: 20_000, interval: 20 });
  return commandChannelStatus(lease).pid!;
}

async function tree(): Promise<string> {
  const dir = path.join(w.host, "tree");
  await fsp.mkdir(path.join(dir, "sub"), { recursive: true });
  await fsp.writeFile(path.join(dir, "bytes.bin"), Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
  await fsp.writeFile(path.join(dir, "sub/big.bin"), pseudoRandomBytes(1024 * 1024));
  await fsp.chmod(path.join(dir, "sub/big.bin"), 0o750);
  return dir;
}

const log = () => path.join(w.base, "post-upload.log");
const postUploadRuns = () => (fs.existsSync(log()) ? fs.readFileSync(log(), "utf8").split("\n").filter(Boolean).length : 0);

function treeIn(source: string, target: string, postUpload = `echo ran >> '${log()}'`): PluginSyncOperation[] {
  return [{ operationId: "in", files: [{ sourcePath: source, targetPath: target, kind: "directory" }], postUploadCommands: [{ command: postUpload }] }];
}

describe("sync over the command channel", () => {
  it("moves the archives over a ready channel with no file-API call and no vendor exec; the file API before it is ready and when switched off", async () => {
    const files = createTestFileTransport();
    const runner = channelOver(vendor);
    const strategy = syncFor(runner, files, { prefer: "file-api", uploadScratchDir: w.sandboxTmp, streamsFree: () => commandChannelCarriesSync(lease) });
    const source = await tree();
    const target = path.join(w.root, "tree");

    // No channel yet: the file API moves the archive.
    await strategy.syncIn(treeIn(source, target), { roots: [w.root] });
    expect(files.calls).toEqual(["upload"]);

    await warm(runner);
    files.calls.length = 0;
    const execs = vendor.scripts.length;
    await strategy.syncIn(treeIn(source, target), { roots: [w.root] });
    const back = path.join(w.host, "back");
    await strategy.syncOut([{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect(files.calls).toEqual([]);
    expect(vendor.scripts.length).toBe(execs);
    expect(commandChannelStatus(lease).overChannel).toBe(4); // upload (cat), install, pack, download (cat)
    expect(postUploadRuns()).toBe(2);
    for (const name of ["bytes.bin", "sub/big.bin"]) {
      expect((await fsp.readFile(path.join(target, name))).equals(await fsp.readFile(path.join(source, name)))).toBe(true);
      expect((await fsp.readFile(path.join(back, name))).equals(await fsp.readFile(path.join(source, name)))).toBe(true);
    }
    expect(await modeOf(path.join(back, "sub/big.bin"))).toBe(0o750);
    expect(await listTree(w.root)).toEqual(["tree", "tree/bytes.bin", "tree/sub", "tree/sub/big.bin"]);
    expect(await listTree(w.scratch)).toEqual([]);

    // Switched off: the file API again, with the channel still ready for commands.
    vi.stubEnv(SYNC_CHANNEL_SWITCH, "off");
    await strategy.syncOut([{ operationId: "out2", files: [{ sourcePath: target, targetPath: path.join(w.host, "back2"), kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect(files.calls).toEqual(["download"]);
    expect(commandChannelStatus(lease).state).toBe("ready");
  });

  it("an archive over the size limit goes through the file API, ready channel or not", async () => {
    const files = createTestFileTransport();
    const runner = channelOver(vendor);
    await warm(runner);
    const strategy = syncFor(runner, files, { prefer: "file-api", uploadScratchDir: w.sandboxTmp, streamsFree: () => commandChannelCarriesSync(lease), freeStreamMaxBytes: 64 * 1024 });
    const target = path.join(w.root, "tree");
    await strategy.syncIn(treeIn(await tree(), target), { roots: [w.root] });
    await strategy.syncOut([{ operationId: "out", files: [{ sourcePath: target, targetPath: path.join(w.host, "back"), kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect(files.calls).toEqual(["upload", "download"]);
    expect((await fsp.readFile(path.join(w.host, "back/sub/big.bin"))).length).toBe(1024 * 1024);
  });

  it("never streams over a runner that could not carry the stream without the channel: the file API, ready channel or not", async () => {
    const files = createTestFileTransport();
    const textOnly: ScriptRunner = { capabilities: { ...vendor.capabilities, binarySafe: false }, run: (script, io) => vendor.run(script, io) };
    const runner = channelOver(textOnly);
    await warm(runner);
    const strategy = syncFor(runner, files, { prefer: "file-api", uploadScratchDir: w.sandboxTmp, streamsFree: () => commandChannelCarriesSync(lease) });
    await strategy.syncIn(treeIn(await tree(), path.join(w.root, "tree")), { roots: [w.root] });
    expect(files.calls).toEqual(["upload"]);
  });

  it("a channel that broke before the operation's command was acknowledged: it runs once, as a vendor exec, and lands every byte", async () => {
    const cut = cuttable(vendor);
    const runner = channelOver(cut.runner);
    const files = createTestFileTransport();
    // Over the runner whatever the channel's state: the readiness check passed, then the channel broke.
    const strategy = syncFor(runner, files, { prefer: "file-api", uploadScratchDir: w.sandboxTmp, streamsFree: () => true });
    await warm(runner);
    const source = await tree();
    const target = path.join(w.root, "tree");
    cut.holdInput(); // requests stop reaching the sandbox
    const syncing = strategy.syncIn(treeIn(source, target), { roots: [w.root] });
    await new Promise((resolve) => setTimeout(resolve, 100));
    cut.cutAll();
    await syncing;
    expect(commandChannelStatus(lease).breaks).toBe(1);
    expect(files.calls).toEqual([]);
    expect(postUploadRuns()).toBe(1);
    expect((await fsp.readFile(path.join(target, "sub/big.bin"))).equals(await fsp.readFile(path.join(source, "sub/big.bin")))).toBe(true);
    expect(await listTree(w.root)).toEqual(["tree", "tree/bytes.bin", "tree/sub", "tree/sub/big.bin"]);
  });

  it("a channel killed while the operation ran: it fails cleanly, ran once, left no stage; the next operation completes", async () => {
    const runner = channelOver(vendor);
    const strategy = syncFor(runner, createTestFileTransport(), { prefer: "file-api", uploadScratchDir: w.sandboxTmp, streamsFree: () => true });
    const muxPid = await warm(runner);
    const source = await tree();
    const target = path.join(w.root, "tree");
    const syncing = strategy.syncIn(treeIn(source, target, `echo ran >> '${log()}'; sleep 30`), { roots: [w.root] });
    await vi.waitFor(() => expect(postUploadRuns()).toBe(1), { timeout: 20_000, interval: 10 });
    process.kill(muxPid, "SIGKILL");
    await expect(syncing).rejects.toMatchObject({ code: "SYNC_TRANSPORT_FAILED" });
    expect(postUploadRuns()).toBe(1);
    // The tree was replaced before the post-upload command ran; no stage is left beside it.
    expect(await listTree(w.root)).toEqual(["tree", "tree/bytes.bin", "tree/sub", "tree/sub/big.bin"]);
    expect((await fsp.readdir(w.sandboxTmp)).filter((name) => name.startsWith(".paperclip-upload-scratch"))).toEqual([]);

    await strategy.syncIn(treeIn(source, path.join(w.root, "again")), { roots: [w.root] });
    expect(postUploadRuns()).toBe(2);
    expect((await fsp.readFile(path.join(w.root, "again/sub/big.bin"))).length).toBe(1024 * 1024);
  });
});
