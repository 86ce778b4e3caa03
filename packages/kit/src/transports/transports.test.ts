import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { createLocalScriptRunner } from "../exec/local/local-runner.js";
import { processGroupAlive } from "../exec/local/process-group.js";
import { executeCommand } from "../exec/execute.js";
import { createTestFileTransport } from "../sync/__fixtures__/local-files.js";
import type { ScriptIo, ScriptRunner } from "../transport.js";
import { createBufferedRunner } from "./buffered-runner.js";
import { exitMarkerLine } from "./exit-marker.js";
import { createFileStdioRunner } from "./file-stdio-runner.js";
import { withInlineEnv } from "./inline-env.js";
import { withLengthFramedStdin } from "./length-framed-stdin.js";
import { withDeadline } from "./deadline.js";
import { withRemoteGroupKill } from "./remote-group-kill.js";
import { runSpawnedScript } from "./spawn-process.js";
import { demuxOutput, muxScript } from "./stdio-mux.js";

// The "vendor" in these tests runs our own test scripts in a host temp dir (like fake-plugin).
const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-transports-"));
const ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: root };
const local = createLocalScriptRunner({ cwd: root, env: ENV });
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const collect = () => {
  const chunks: Buffer[] = [];
  return { sink: (chunk: Buffer) => chunks.push(chunk), bytes: () => Buffer.concat(chunks), text: () => Buffer.concat(chunks).toString("utf8") };
};
const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

/** A vendor exec API without stdin that merges stdout and stderr into one (text) output. */
function combinedExecVendor(opts: { asText: boolean }) {
  const calls: string[] = [];
  return {
    calls,
    exec: async (request: { command: string }) => {
      calls.push("exec");
      const out = collect();
      const exit = await local.run(`exec 2>&1\n${request.command}`, { stdout: out.sink });
      return { exitCode: exit.exitCode, output: opts.asText ? out.bytes().toString("utf8") : out.bytes() };
    },
  };
}

describe("stdio mux", () => {
  it("carries stdout, stderr and the exit status through one text output, ignoring noise before the markers", async () => {
    const { command, nonce } = muxScript(`printf 'out'; printf 'err' >&2; exit 3`, { stdin: { kind: "none" } });
    const out = collect();
    await local.run(`echo profile noise; exec 2>&1\n${command}`, { stdout: out.sink });
    expect(demuxOutput(out.text(), nonce)).toEqual({ stdout: Buffer.from("out"), stderr: Buffer.from("err"), exitCode: 3 });
  });

  it("refuses an output without the exit marker", () => {
    expect(() => demuxOutput("nothing here", "abc")).toThrow(/did not report the command's exit/);
  });
});

describe("createFileStdioRunner", () => {
  it("passes every byte value both ways in ONE vendor call (stdin inlined), streams kept apart", async () => {
    const vendor = combinedExecVendor({ asText: true });
    const runner = createFileStdioRunner({ exec: vendor.exec });
    const out = collect();
    const err = collect();
    const exit = await runner.run("cat; printf 'e' >&2; exit 7", { stdin: allBytes, stdout: out.sink, stderr: err.sink });
    expect(exit).toMatchObject({ exitCode: 7, reason: "exit" });
    expect(out.bytes().equals(allBytes)).toBe(true);
    expect(err.text()).toBe("e");
    expect(vendor.calls).toEqual(["exec"]);
  });

  it("uploads large stdin through the file API: two calls, and the staged file is gone afterwards", async () => {
    const vendor = combinedExecVendor({ asText: false });
    const runner = createFileStdioRunner({ exec: vendor.exec, files: createTestFileTransport(vendor.calls), scratchDir: root, inlineStdinBytes: 1024 });
    const big = Buffer.alloc(300_000, 0x5a);
    const out = collect();
    const exit = await runner.run("wc -c", { stdin: big, stdout: out.sink });
    expect(exit.exitCode).toBe(0);
    expect(out.text().trim()).toBe("300000");
    expect(vendor.calls).toEqual(["upload", "exec"]);
    expect((await fsp.readdir(root)).filter((name) => name.startsWith(".paperclip-"))).toEqual([]);
  });

  it("refuses stdin over the inline limit when there is no file API", async () => {
    const vendor = combinedExecVendor({ asText: true });
    const runner = createFileStdioRunner({ exec: vendor.exec, inlineStdinBytes: 10 });
    await expect(runner.run("cat", { stdin: Buffer.alloc(11) })).rejects.toMatchObject({ code: "TRANSPORT_LIMIT" });
    expect(vendor.calls).toEqual([]);
  });

  it("runs the kit's executeCommand with env, cwd and stdin", async () => {
    const vendor = combinedExecVendor({ asText: true });
    const runner = createFileStdioRunner({ exec: vendor.exec });
    const result = await executeCommand(runner, { command: "sh", args: ["-c", 'read x; echo "$x $GREETING $(pwd)"'], cwd: root, env: { GREETING: "hi" }, stdin: "in\n" });
    expect(result).toMatchObject({ exitCode: 0, stdout: `in hi ${root}\n`, timedOut: false });
    expect(vendor.calls).toHaveLength(1);
  });
});

describe("createBufferedRunner", () => {
  it("a text-returning vendor corrupts bytes and says so by declaring binarySafe: false", async () => {
    const runner = createBufferedRunner({
      capabilities: { binarySafe: false, separateStderr: true, remoteTimeout: false },
      exec: async (request) => {
        const out = collect();
        const exit = await local.run(request.script, { stdin: request.stdin ?? null, stdout: out.sink });
        return { exitCode: exit.exitCode, stdout: out.bytes().toString("utf8") };
      },
    });
    const out = collect();
    await runner.run("cat", { stdin: Buffer.from([0, 0xff, 0x80, 0x0a, 0xc8]), stdout: out.sink });
    expect(runner.capabilities).toMatchObject({ stdin: "buffered", binarySafe: false, liveOutput: false });
    expect(out.bytes().equals(Buffer.from([0, 0xff, 0x80, 0x0a, 0xc8]))).toBe(false);
  });

  it("reports a vendor-side timeout as timedOut, and executeCommand passes the deadline on", async () => {
    let seenTimeout: number | undefined;
    const runner = createBufferedRunner({
      capabilities: { binarySafe: true, separateStderr: true, remoteTimeout: true },
      exec: async (request) => {
        seenTimeout = request.timeoutMs;
        return { exitCode: null, stdout: Buffer.from("partial"), timedOut: true };
      },
    });
    const result = await executeCommand(runner, { command: "sleep", args: ["9"], timeoutMs: 1234 });
    expect(seenTimeout).toBe(1234);
    expect(result).toMatchObject({ exitCode: null, timedOut: true, stdout: "partial" });
  });

  it("refuses stdin over maxStdinBytes before calling the vendor", async () => {
    let calls = 0;
    const runner = createBufferedRunner({
      capabilities: { binarySafe: true, separateStderr: true, remoteTimeout: false, maxStdinBytes: 4 },
      exec: async () => {
        calls += 1;
        return { exitCode: 0, stdout: "" };
      },
    });
    await expect(runner.run("cat", { stdin: Readable.from([Buffer.alloc(3), Buffer.alloc(3)]) })).rejects.toThrow(/4-byte limit/);
    expect(calls).toBe(0);
  });
});

describe("withRemoteGroupKill", () => {
  it("ends the whole remote process group from a second call when the transport cannot signal", async () => {
    // A transport that ignores aborts entirely (signals: "none").
    const deaf: ScriptRunner = { capabilities: { ...local.capabilities, signals: "none" }, run: (script, io) => local.run(script, { ...io, signal: undefined }) };
    const runner = withRemoteGroupKill(deaf, { pidDir: root });
    expect(runner.capabilities.signals).toBe("group");
    const controller = new AbortController();
    const out = collect();
    const started = Date.now();
    const running = runner.run("sleep 60 & echo $! ; sleep 60", { stdout: out.sink, signal: controller.signal, killGraceMs: 100 });
    await waitFor(() => out.text().includes("\n"));
    const backgroundPid = Number(out.text().trim());
    controller.abort();
    const exit = await running;
    expect(exit).toMatchObject({ reason: "aborted", exitCode: null });
    // A bound far from the alternative (a slow machine is not a failure): without the abort the script runs 60 s.
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(isAlive(backgroundPid)).toBe(false);
    expect((await fsp.readdir(root)).filter((name) => name.startsWith(".paperclip-pg."))).toEqual([]);
  });

  it("with a remote deadline, ends the job's group after the vendor ended only the wrapper (no worker left to abort)", async () => {
    // The vendor enforces the deadline by killing the process group it started (the wrapper's),
    // which does not reach the job's own session; nothing aborts from our side.
    const vendorDeadline: ScriptRunner = {
      capabilities: { ...local.capabilities, signals: "none", remoteTimeout: true },
      run: (script, io) =>
        new Promise((resolve, reject) => {
          let pgid: number | undefined;
          const spawned = createLocalScriptRunner({ cwd: root, env: ENV, onSpawn: (pid) => (pgid = pid) });
          const timer = setTimeout(() => pgid !== undefined && process.kill(-pgid, "SIGKILL"), io.timeoutMs);
          spawned.run(script, { ...io, signal: undefined }).then((exit) => {
            clearTimeout(timer);
            resolve({ ...exit, exitCode: null, reason: "timeout" });
          }, reject);
        }),
    };
    const runner = withRemoteGroupKill(vendorDeadline, { pidDir: root });
    const out = collect();
    const exit = await runner.run("sleep 60 & echo $!; sleep 60", { stdout: out.sink, timeoutMs: 500 });
    expect(exit.reason).toBe("timeout");
    const survivor = Number(out.text().trim());
    expect(survivor).toBeGreaterThan(0);
    await waitFor(() => !isAlive(survivor), 30_000);
  });

  it("writes the script into the wrapper once (argv limits count every byte)", async () => {
    let seen = "";
    const spy: ScriptRunner = { capabilities: local.capabilities, run: (script, io) => ((seen = script), local.run(script, io)) };
    const marker = `unique-${"x".repeat(500)}`;
    await withRemoteGroupKill(spy, { pidDir: root }).run(`echo ${marker} >/dev/null`, {});
    expect(seen.split(marker).length - 1).toBe(1);
  });

  it("keeps stdin, exit codes and env unchanged when not aborted", async () => {
    const runner = withRemoteGroupKill(local, { pidDir: root });
    const out = collect();
    const exit = await runner.run('cat; echo "$X"; exit 5', { stdin: "in\n", env: { X: "env-ok" }, stdout: out.sink });
    expect(exit.exitCode).toBe(5);
    expect(out.text()).toBe("in\nenv-ok\n");
  });
});

describe("withInlineEnv", () => {
  it("delivers io.env through the script for a transport without an env field", async () => {
    let seenEnv: ScriptIo["env"];
    const noEnv: ScriptRunner = {
      capabilities: local.capabilities,
      run: (script, io) => {
        seenEnv = io.env;
        return local.run(script, { ...io, env: undefined });
      },
    };
    const out = collect();
    await withInlineEnv(noEnv).run('printf %s "$V"', { env: { V: "it's $HOME" }, stdout: out.sink });
    expect(seenEnv).toBeUndefined();
    expect(out.text()).toBe("it's $HOME");
  });
});

describe("withLengthFramedStdin", () => {
  /** stdin bytes arrive but EOF never does, like a WebSocket exec that cannot half-close. */
  const noEof: ScriptRunner = {
    capabilities: { ...local.capabilities, stdinEof: false },
    run: (script, io) => {
      const held = new PassThrough();
      const input = io.stdin;
      if (typeof input === "string" || Buffer.isBuffer(input)) held.write(input);
      else if (input) input.on("data", (chunk: Buffer) => held.write(chunk));
      const exit = local.run(script, { ...io, stdin: held });
      return exit.finally(() => held.end());
    },
  };

  it("gives the script EOF after exactly the stdin bytes, for buffers and for streams", async () => {
    const runner = withLengthFramedStdin(noEof, { spoolDir: root });
    const out = collect();
    const exit = await runner.run("wc -c", { stdin: allBytes, stdout: out.sink });
    expect(exit.exitCode).toBe(0);
    expect(out.text().trim()).toBe("256");
    const streamed = collect();
    await runner.run("cat", { stdin: Readable.from([allBytes, allBytes]), stdout: streamed.sink });
    expect(streamed.bytes().equals(Buffer.concat([allBytes, allBytes]))).toBe(true);
  });
});

describe("runSpawnedScript with an exit marker", () => {
  it("returns at the remote exit although the client stays open for a background child", async () => {
    const marker = "PCEXIT-test";
    // `sleep 30` stands in for an ssh client held open by the remote background child.
    const remote = `echo hello; sh -c 'sleep 30' >/dev/null 2>&1 & ${exitMarkerLine(marker, "3")}; sleep 30`;
    const out = collect();
    const err = collect();
    const started = Date.now();
    const exit = await runSpawnedScript({ file: "/bin/sh", args: ["-c", remote], env: ENV, exitMarker: marker }, { stdout: out.sink, stderr: err.sink });
    // A bound far from the alternative (a slow machine is not a failure): without the marker the client stays open 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(exit.exitCode).toBe(3);
    expect(out.text()).toBe("hello\n");
    expect(err.text()).not.toContain(marker);
    // Stand-ins for the remote side's processes; a real ssh client would only end the local client.
    if (exit.pid !== undefined && processGroupAlive(exit.pid)) process.kill(-exit.pid, "SIGKILL");
  });

  it("keeps stdout that arrives after the exit marker (stdout and stderr travel apart) until the client exits", async () => {
    const marker = "PCEXIT-late";
    // The marker on stderr outruns the last stdout bytes by more than the idle drain (200 ms).
    const remote = `printf first; ${exitMarkerLine(marker, "0")}; sleep 0.5; printf ' last'`;
    const out = collect();
    const exit = await runSpawnedScript({ file: "/bin/sh", args: ["-c", remote], env: ENV, exitMarker: marker }, { stdout: out.sink });
    expect([exit.exitCode, out.text()]).toEqual([0, "first last"]);
  });

  it("keeps stdout that an ssh master writes after its client exited and after the marker, past the short drain", async () => {
    const marker = "PCEXIT-master";
    // The client (sh) exits at once; what stands in for the multiplexing master writes the marker
    // 100 ms later and the last stdout bytes 400 ms after that: longer than the 200 ms drain that
    // judges a client's exit without a marker, shorter than the silence allowed after the marker.
    const remote = `(sleep 0.1; ${exitMarkerLine(marker, "0")}; sleep 0.4; printf last) & exit 0`;
    const out = collect();
    const exit = await runSpawnedScript({ file: "/bin/sh", args: ["-c", remote], env: ENV, exitMarker: marker, missingExitMarker: () => new Error("no marker") }, { stdout: out.sink });
    expect([exit.exitCode, out.text()]).toEqual([0, "last"]);
  });

  it("reports a client that ended without the exit marker as the transport failure it names", async () => {
    await expect(
      runSpawnedScript(
        { file: "/bin/sh", args: ["-c", "echo partial; exit 255"], env: ENV, exitMarker: "PCEXIT-lost", missingExitMarker: ({ exitCode }) => new Error(`lost (client ${exitCode})`) },
        {},
      ),
    ).rejects.toThrow("lost (client 255)");
  });
});

async function waitFor(check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

describe("withDeadline", () => {
  it("ends a run at the lease's ceiling and says timeout; the caller's own abort stays an abort", async () => {
    const capped = withDeadline(local, 200);
    const timedOut = await capped.run("sleep 30", {});
    expect(timedOut).toMatchObject({ exitCode: null, reason: "timeout" });
    const result = await executeCommand(capped, { command: "sleep", args: ["30"] });
    expect(result).toMatchObject({ exitCode: null, timedOut: true });
    const controller = new AbortController();
    const running = withDeadline(local, 60_000).run("sleep 30", { signal: controller.signal });
    controller.abort();
    expect(await running).toMatchObject({ reason: "aborted" });
    expect(await withDeadline(local, 60_000).run("exit 3", {})).toMatchObject({ exitCode: 3, reason: "exit" });
  });
});
