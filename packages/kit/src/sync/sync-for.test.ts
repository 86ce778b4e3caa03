import fsp from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FileTransport, ScriptRunner } from "../transport.js";
import { createBufferedRunner } from "../transports/buffered-runner.js";
import { createFileStdioRunner } from "../transports/file-stdio-runner.js";
import { syncFor, syncIn, syncOut } from "./index.js";
import { createTestFileTransport } from "./__fixtures__/local-files.js";
import { listTree, makeWorld, modeOf, type World } from "./__fixtures__/world.js";

let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

/** A request/response exec API that returns output as a JSON string (coder's `POST /run` shape). */
function jsonStringRunner(local: ScriptRunner): ScriptRunner & { calls: number } {
  const runner = createBufferedRunner({
    capabilities: { binarySafe: false, separateStderr: true, remoteTimeout: false },
    exec: async (request) => {
      counted.calls += 1;
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const exit = await local.run(request.script, { stdin: request.stdin ?? null, env: request.env, stdout: (c) => out.push(c), stderr: (c) => err.push(c) });
      // What a JSON API does to bytes: they become a (UTF-8) string.
      const body = JSON.parse(JSON.stringify({ stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })) as { stdout: string; stderr: string };
      return { exitCode: exit.exitCode, stdout: body.stdout, stderr: body.stderr };
    },
  });
  const counted = Object.assign(runner, { calls: 0 });
  return counted;
}

/** An exec API with no stdin and combined output, plus a file API (Daytona's shape). */
function fileApiVendor(local: ScriptRunner) {
  const calls: string[] = [];
  const files = createTestFileTransport(calls);
  const runner = createFileStdioRunner({
    files,
    exec: async (request) => {
      calls.push("exec");
      const out: Buffer[] = [];
      const exit = await local.run(`exec 2>&1\n${request.command}`, { stdout: (c) => out.push(c) });
      return { exitCode: exit.exitCode, output: Buffer.concat(out).toString("latin1") };
    },
  });
  return { calls, files, runner };
}

async function allBytesTree(): Promise<string> {
  const tree = path.join(w.host, "tree");
  await fsp.mkdir(path.join(tree, "sub"), { recursive: true });
  await fsp.writeFile(path.join(tree, "bytes.bin"), allBytes);
  await fsp.writeFile(path.join(tree, "sub/more.bin"), Buffer.concat([allBytes, Buffer.from(allBytes).reverse()]));
  await fsp.chmod(path.join(tree, "sub/more.bin"), 0o750);
  return tree;
}

describe("streaming sync over a transport that is not binary-safe", () => {
  it("fails loudly with nothing written, while syncFor picks base64 and lands every byte", async () => {
    const runner = jsonStringRunner(w.runner);
    const tree = await allBytesTree();
    const target = path.join(w.root, "tree");
    const ops = [{ operationId: "in", files: [{ sourcePath: tree, targetPath: target, kind: "directory" as const }] }];
    await expect(syncIn(runner, ops, { roots: [w.root] })).rejects.toMatchObject({ code: "SYNC_TRANSPORT_UNSUITABLE" });
    await expect(syncOut(runner, [{ operationId: "out", files: [{ sourcePath: w.root, targetPath: path.join(w.host, "x"), kind: "directory" }] }], { roots: [w.root] })).rejects.toMatchObject({
      code: "SYNC_TRANSPORT_UNSUITABLE",
    });
    expect(runner.calls).toBe(0);
    expect(await listTree(w.root)).toEqual([]);

    const strategy = syncFor(runner);
    expect(strategy.kind).toBe("base64");
    await strategy.syncIn(ops, { roots: [w.root] });
    expect((await fsp.readFile(path.join(target, "bytes.bin"))).equals(allBytes)).toBe(true);
    const back = path.join(w.host, "back");
    await strategy.syncOut([{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect((await fsp.readFile(path.join(back, "bytes.bin"))).equals(allBytes)).toBe(true);
    expect(await modeOf(path.join(back, "sub/more.bin"))).toBe(0o750);
  });
});

describe("syncFor", () => {
  it("streams over a binary-safe streamed-stdin runner, unless asked to prefer the file API it is given", () => {
    expect(syncFor(w.runner).kind).toBe("stream");
    const vendor = fileApiVendor(w.runner);
    expect(syncFor(w.runner, vendor.files).kind).toBe("stream");
    expect(syncFor(w.runner, vendor.files, { prefer: "file-api" }).kind).toBe("file-api");
    expect(syncFor(w.runner, undefined, { prefer: "file-api" }).kind).toBe("stream");
  });

  it("sizes base64 chunks to the transport's stdin limit", async () => {
    const limited = createBufferedRunner({
      capabilities: { binarySafe: true, separateStderr: true, remoteTimeout: false, maxStdinBytes: 64 * 1024 },
      exec: async (request) => {
        const out: Buffer[] = [];
        const exit = await w.runner.run(request.script, { stdin: request.stdin ?? null, stdout: (c) => out.push(c) });
        return { exitCode: exit.exitCode, stdout: Buffer.concat(out) };
      },
    });
    const strategy = syncFor(limited);
    expect(strategy.kind).toBe("base64");
    const source = path.join(w.host, "big.bin");
    await fsp.writeFile(source, Buffer.alloc(500_000, 7));
    await strategy.syncIn([{ operationId: "in", files: [{ sourcePath: source, targetPath: path.join(w.root, "big.bin"), kind: "file" }] }], { roots: [w.root] });
    expect((await fsp.stat(path.join(w.root, "big.bin"))).size).toBe(500_000);
    expect(w.runner.maxStdinBytes).toBeLessThanOrEqual(64 * 1024);
  });

  it("uses the file API when the transport has no streamed stdin: two vendor calls per operation, post-upload command included", async () => {
    const vendor = fileApiVendor(w.runner);
    const strategy = syncFor(vendor.runner, vendor.files, { uploadScratchDir: w.sandboxTmp });
    expect(strategy.kind).toBe("file-api");
    const tree = await allBytesTree();
    const archive = path.join(w.host, "tree.tar");
    const target = path.join(w.root, "tree");
    // The host's own pattern: upload a tar as a FILE, then extract it with a post-upload command.
    const { execFileSync } = await import("node:child_process");
    execFileSync("tar", ["-cf", archive, "-C", tree, "."]);
    await strategy.syncIn(
      [
        {
          operationId: "host-style",
          files: [{ sourcePath: archive, targetPath: path.join(w.root, "upload.tar"), kind: "file", mode: 0o600 }],
          postUploadCommands: [{ command: `mkdir -p '${target}' && tar -xf '${w.root}/upload.tar' -C '${target}' && rm -f '${w.root}/upload.tar'`, timeoutMs: 60_000 }],
        },
      ],
      { roots: [w.root] },
    );
    expect(vendor.calls).toEqual(["upload", "exec"]);
    expect((await fsp.readFile(path.join(target, "sub/more.bin"))).length).toBe(512);
    expect(await listTree(w.root)).toEqual(["tree", "tree/bytes.bin", "tree/sub", "tree/sub/more.bin"]);

    vendor.calls.length = 0;
    const back = path.join(w.host, "back");
    await strategy.syncOut([{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch });
    expect(vendor.calls).toEqual(["exec", "download"]);
    expect((await fsp.readFile(path.join(back, "bytes.bin"))).equals(allBytes)).toBe(true);
    expect(await modeOf(path.join(back, "sub/more.bin"))).toBe(0o750);
    expect(await listTree(w.scratch)).toEqual([]);

    // The download stage is removed by the next sync-out through the same transport.
    const stages = () => fsp.readdir(w.sandboxTmp).then((names) => names.filter((name) => name.startsWith(".paperclip-download.")));
    expect(await stages()).toHaveLength(1);
    await strategy.syncOut([{ operationId: "again", files: [{ sourcePath: path.join(target, "bytes.bin"), targetPath: path.join(w.host, "one.bin"), kind: "file" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    });
    expect(await stages()).toHaveLength(1);

    // The strategy owns what it left: dispose removes it with one call, then there is nothing to do.
    vendor.calls.length = 0;
    await strategy.dispose();
    expect(await stages()).toEqual([]);
    await strategy.dispose();
    expect(vendor.calls).toEqual(["exec"]);
  });

  it("reports a failing folded post-upload command as that command, and leaves no scratch upload", async () => {
    const vendor = fileApiVendor(w.runner);
    const strategy = syncFor(vendor.runner, vendor.files, { uploadScratchDir: w.sandboxTmp });
    const source = path.join(w.host, "f");
    await fsp.writeFile(source, "x");
    await expect(
      strategy.syncIn([{ operationId: "op", files: [{ sourcePath: source, targetPath: path.join(w.root, "f"), kind: "file" }], postUploadCommands: [{ command: "true" }, { command: "exit 9" }] }], {
        roots: [w.root],
      }),
    ).rejects.toMatchObject({ code: "SYNC_COMMAND_FAILED", message: expect.stringContaining("post-upload command 2 of 2 exited with code 9") });
    expect(await listTree(w.sandboxTmp)).toEqual([]);
  });

  it("reports a download that breaks off as a transport failure, leaving no target, staging or scratch", async () => {
    const vendor = fileApiVendor(w.runner);
    const target = path.join(w.root, "tree");
    await fsp.mkdir(target);
    await fsp.writeFile(path.join(target, "big.bin"), Buffer.alloc(3 * 1024 * 1024, 7));
    const breaking: FileTransport = {
      ...vendor.files,
      // Half a MiB of the archive, then the connection drops.
      download: async (remote) =>
        Readable.from(
          (async function* () {
            yield (await fsp.readFile(remote)).subarray(0, 512 * 1024);
            throw new Error("connection reset");
          })(),
        ),
    };
    const strategy = syncFor(vendor.runner, breaking, { uploadScratchDir: w.sandboxTmp });
    const back = path.join(w.host, "back");
    await expect(
      strategy.syncOut([{ operationId: "out", files: [{ sourcePath: target, targetPath: back, kind: "directory" }] }], { roots: [w.root], hostScratchDir: w.scratch }),
    ).rejects.toMatchObject({ code: "SYNC_TRANSPORT_FAILED" });
    expect(await listTree(w.host)).toEqual([]);
    expect(await listTree(w.scratch)).toEqual([]);
  });

  it("refuses a file-API upload that the vendor stored short", async () => {
    const vendor = fileApiVendor(w.runner);
    const short: FileTransport = { ...vendor.files, upload: async (target) => fsp.writeFile(target, "abc") };
    const strategy = syncFor(vendor.runner, short, { uploadScratchDir: w.sandboxTmp });
    const source = path.join(w.host, "f");
    await fsp.writeFile(source, "abcdef");
    await expect(strategy.syncIn([{ operationId: "op", files: [{ sourcePath: source, targetPath: path.join(w.root, "f"), kind: "file" }] }], { roots: [w.root] })).rejects.toMatchObject({
      code: "SYNC_REMOTE_FAILED",
    });
    expect(await listTree(w.root)).toEqual([]);
    expect(await listTree(w.sandboxTmp)).toEqual([]);
  });
});
