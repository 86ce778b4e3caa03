import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner } from "../transport.js";
import { SyncError, syncIn, syncOut } from "./index.js";
import { receiveMapping } from "./sync-out.js";
import { resolveSyncOptions } from "./options.js";
import { expectSuccess, runScript } from "./run-script.js";
import { listTree, makeWorld, modeOf, pseudoRandomBytes, type World } from "./__fixtures__/world.js";

let w: World;
beforeEach(async () => {
  w = await makeWorld();
});
afterEach(async () => {
  await w.cleanup();
});

describe("outbound size limit", () => {
  it("aborts the sandbox side past maxOutboundBytes and leaves no scratch or target", async () => {
    await fs.writeFile(path.join(w.root, "big.bin"), pseudoRandomBytes(4 * 1024 * 1024));
    const error = await syncOut(w.runner, [{ operationId: "big", files: [{ sourcePath: path.join(w.root, "big.bin"), targetPath: path.join(w.host, "big.bin"), kind: "file" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
      maxOutboundBytes: 256 * 1024,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect(error).toMatchObject({ code: "SYNC_TOO_LARGE", operationId: "big" });
    expect(await listTree(w.scratch)).toEqual([]);
    expect(await listTree(w.host)).toEqual([]);
  });

  it("aborts a sandbox that keeps streaming (the runner's signal fires)", async () => {
    let sawAbort = false;
    const endless: ScriptRunner = {
      capabilities: STREAM_TRANSPORT,
      async run(_script: string, io: ScriptIo): Promise<ScriptExit> {
        const out = io.stdout as NodeJS.WritableStream;
        const chunk = Buffer.alloc(64 * 1024);
        while (!io.signal?.aborted) {
          await new Promise<void>((done) => out.write(chunk, () => done()));
        }
        sawAbort = true;
        return { exitCode: null, signal: "SIGTERM", reason: "aborted" };
      },
    };
    await expect(
      syncOut(endless, [{ operationId: "x", files: [{ sourcePath: path.join(w.root, "d"), targetPath: path.join(w.host, "d"), kind: "directory" }] }], {
        roots: [w.root],
        hostScratchDir: w.scratch,
        maxOutboundBytes: 1024 * 1024,
      }),
    ).rejects.toMatchObject({ code: "SYNC_TOO_LARGE" });
    expect(sawAbort).toBe(true);
    expect(await listTree(w.scratch)).toEqual([]);
  });
});

describe("host scratch and staging", () => {
  it("are removed after success and after failure", async () => {
    await fs.mkdir(path.join(w.root, "d"));
    await fs.writeFile(path.join(w.root, "d/f"), "x");
    const ok = [{ operationId: "ok", files: [{ sourcePath: path.join(w.root, "d"), targetPath: path.join(w.host, "d"), kind: "directory" as const }] }];
    await syncOut(w.runner, ok, { roots: [w.root], hostScratchDir: w.scratch });
    expect(await listTree(w.scratch)).toEqual([]);
    expect(await listTree(w.host)).toEqual(["d", "d/f"]);

    const missing = [{ operationId: "ko", files: [{ sourcePath: path.join(w.root, "nope"), targetPath: path.join(w.host, "n"), kind: "directory" as const }] }];
    await expect(syncOut(w.runner, missing, { roots: [w.root], hostScratchDir: w.scratch })).rejects.toMatchObject({ code: "SYNC_SOURCE_INVALID" });
    expect(await listTree(w.scratch)).toEqual([]);
    expect(await listTree(w.host)).toEqual(["d", "d/f"]);
  });

  it("give a file no world-readable window: 0700 staging, final mode set before the rename", async () => {
    await fs.writeFile(path.join(w.root, "secret"), "s3cr3t");
    await fs.chmod(path.join(w.root, "secret"), 0o644);
    const target = path.join(w.host, "secret");
    const seen: { stagingDirMode: number; fileMode: number; targetExists: boolean; hostScratch: string[] }[] = [];
    const o = resolveSyncOptions({ roots: [w.root], hostScratchDir: w.scratch });
    const { packToStdoutScript } = await import("./download-scripts.js");
    const { confineSandboxPath } = await import("./sandbox-path.js");
    await receiveMapping(
      { sourcePath: path.join(w.root, "secret"), targetPath: target, kind: "file", mode: 0o600 },
      o,
      async (_source, sink, format) => {
        const script = packToStdoutScript(confineSandboxPath(path.join(w.root, "secret"), o.roots, "s"), o.roots, {
          kind: "file",
          followSymlinks: false,
          exclude: undefined,
          sparse: format.sparse,
        });
        expectSuccess(await runScript(w.runner, script, { stdout: sink, maxStderrBytes: 4096 }), "pack");
      },
      {
        beforeRename: async (staged) => {
          const stagingDir = path.dirname(path.dirname(staged));
          seen.push({
            stagingDirMode: await modeOf(stagingDir),
            fileMode: await modeOf(staged),
            targetExists: await fs.access(target).then(
              () => true,
              () => false,
            ),
            // The archive is extracted as it arrives: no copy of it waits in host scratch.
            hostScratch: await listTree(w.scratch),
          });
        },
      },
    );
    expect(seen).toEqual([{ stagingDirMode: 0o700, fileMode: 0o600, targetExists: false, hostScratch: [] }]);
    expect(await modeOf(target)).toBe(0o600);
    expect(await listTree(w.host)).toEqual(["secret"]);
  });
});

describe("sandbox stderr", () => {
  it("is captured only up to maxStderrBytes (its tail) and quoted in the error", async () => {
    const noisy: ScriptRunner = {
      capabilities: STREAM_TRANSPORT,
      async run(_script: string, io: ScriptIo): Promise<ScriptExit> {
        const err = io.stderr as (chunk: Buffer) => void;
        for (let i = 0; i < 100; i++) err(Buffer.from(`line ${i} ${"x".repeat(1000)}\n`));
        err(Buffer.from("the real reason\n"));
        return { exitCode: 2, signal: null, reason: "exit" };
      },
    };
    const outcome = await runScript(noisy, "true", { maxStderrBytes: 4096 });
    expect(Buffer.byteLength(outcome.stderrTail)).toBeLessThanOrEqual(4096);
    const error = (() => {
      try {
        expectSuccess(outcome, "step");
      } catch (e) {
        return e as SyncError;
      }
      return undefined;
    })();
    expect(error).toMatchObject({ code: "SYNC_REMOTE_FAILED", exitCode: 2 });
    expect(error?.message).toContain("the real reason");
    expect(error?.message).not.toContain("line 0 ");
  });

  it("from a failing sandbox tar reaches the SyncError", async () => {
    await fs.mkdir(path.join(w.root, "d"));
    await fs.writeFile(path.join(w.root, "d/unreadable"), "x");
    await fs.chmod(path.join(w.root, "d/unreadable"), 0o000);
    const error = await syncOut(w.runner, [{ operationId: "u", files: [{ sourcePath: path.join(w.root, "d"), targetPath: path.join(w.host, "d"), kind: "directory" }] }], {
      roots: [w.root],
      hostScratchDir: w.scratch,
    }).catch((e: unknown) => e as SyncError);
    await fs.chmod(path.join(w.root, "d/unreadable"), 0o600);
    if (process.getuid?.() === 0) return; // root reads anything; nothing to assert
    expect(error).toMatchObject({ code: "SYNC_REMOTE_FAILED" });
    expect((error as SyncError).stderrTail).toMatch(/unreadable/);
    expect(await listTree(w.scratch)).toEqual([]);
  });
});

describe("abort", () => {
  it("ends a running transfer and reports SYNC_ABORTED", async () => {
    const controller = new AbortController();
    const stalled: ScriptRunner = {
      capabilities: STREAM_TRANSPORT,
      run(_script: string, io: ScriptIo): Promise<ScriptExit> {
        return new Promise((resolve) => {
          io.signal?.addEventListener("abort", () => resolve({ exitCode: null, signal: "SIGTERM", reason: "aborted" }), { once: true });
        });
      },
    };
    await fs.writeFile(path.join(w.host, "f"), "x");
    setTimeout(() => controller.abort(), 50);
    await expect(
      syncIn(stalled, [{ operationId: "a", files: [{ sourcePath: path.join(w.host, "f"), targetPath: path.join(w.root, "f"), kind: "file" }] }], {
        roots: [w.root],
        signal: controller.signal,
      }),
    ).rejects.toMatchObject({ code: "SYNC_ABORTED", operationId: "a" });
  });
});
