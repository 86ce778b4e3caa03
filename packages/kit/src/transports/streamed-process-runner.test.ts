import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { executeCommand } from "../exec/execute.js";
import type { StreamedProcessApi, StreamedProcessExit, StreamedProcessSpec } from "./streamed-process-runner.js";
import { createStreamedProcessRunner } from "./streamed-process-runner.js";
import { withRemoteGroupKill } from "./remote-group-kill.js";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-streamed-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

interface Call {
  op: "start" | "write" | "close" | "kill";
  bytes?: number;
  detail?: string;
}

/**
 * A vendor with envd's shape, on this machine: start spawns the argv (its output streamed back as
 * events), stdin arrives by separate write and close calls, kill signals only the pid. Every call is
 * recorded, so the tests can count them.
 */
function localVendor(options: { writeDelayMs?: number } = {}) {
  const calls: Call[] = [];
  const specs: StreamedProcessSpec[] = [];
  const api: StreamedProcessApi = {
    async start(spec, output) {
      calls.push({ op: "start" });
      specs.push(spec);
      const child = spawn(spec.argv[0]!, spec.argv.slice(1), { cwd: root, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...spec.env }, stdio: [spec.stdin ? "pipe" : "ignore", "pipe", "pipe"] });
      child.stdin?.on("error", () => undefined);
      await new Promise<void>((resolve, reject) => {
        child.once("spawn", resolve);
        child.once("error", reject);
      });
      const drained = Promise.all(
        (["stdout", "stderr"] as const).map(
          (name) =>
            new Promise<void>((resolve) => {
              child[name]!.on("data", (chunk: Buffer) => void output[name](chunk));
              child[name]!.on("end", resolve);
            }),
        ),
      );
      const exited = new Promise<{ exitCode: number | null; signal: string | null }>((resolve) => child.once("close", (code, signal) => resolve({ exitCode: code, signal })));
      return {
        pid: child.pid!,
        exited: Promise.all([exited, drained]).then(([exit]) => exit),
        async writeStdin(chunk) {
          calls.push({ op: "write", bytes: chunk.length });
          if (options.writeDelayMs) await new Promise((resolve) => setTimeout(resolve, options.writeDelayMs));
          if (!child.stdin || child.stdin.destroyed || child.exitCode !== null) throw new Error("stdin not enabled or closed");
          await new Promise<void>((resolve, reject) => child.stdin!.write(chunk, (error) => (error ? reject(error) : resolve())));
        },
        async closeStdin() {
          calls.push({ op: "close" });
          child.stdin?.end();
        },
        async kill(signal) {
          calls.push({ op: "kill", detail: signal });
          child.kill(signal);
        },
      };
    },
  };
  return { api, calls, specs, count: (op: Call["op"]) => calls.filter((c) => c.op === op).length };
}

const text = () => {
  const chunks: Buffer[] = [];
  return { sink: (chunk: Buffer) => void chunks.push(chunk), bytes: () => Buffer.concat(chunks), value: () => Buffer.concat(chunks).toString("utf8") };
};
const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

describe("createStreamedProcessRunner", () => {
  it("declares the streamed contract with pid signals; withRemoteGroupKill makes it the whole group", () => {
    const runner = createStreamedProcessRunner({ api: localVendor().api });
    expect(runner.capabilities).toMatchObject({ stdin: "stream", stdinEof: true, binarySafe: true, liveOutput: true, separateStderr: true, signals: "pid", remoteTimeout: false });
    expect(withRemoteGroupKill(runner).capabilities.signals).toBe("group");
  });

  it("a command without stdin is one start call with no stdin pipe, stdout and stderr apart, the exit code kept", async () => {
    const vendor = localVendor();
    const out = text();
    const err = text();
    const exit = await createStreamedProcessRunner({ api: vendor.api }).run("printf out; printf err >&2; exit 7", { stdout: out.sink, stderr: err.sink });
    expect(exit).toMatchObject({ exitCode: 7, signal: null, reason: "exit" });
    expect(exit.pid).toBeGreaterThan(0);
    expect([out.value(), err.value()]).toEqual(["out", "err"]);
    expect(vendor.calls).toEqual([{ op: "start" }]);
    expect(vendor.specs[0]).toMatchObject({ argv: ["/bin/sh", "-c", "printf out; printf err >&2; exit 7"], stdin: false });
  });

  it("small stdin known in full rides inside the command: still one call, every byte value and EOF arrive", async () => {
    const vendor = localVendor();
    const out = text();
    const exit = await createStreamedProcessRunner({ api: vendor.api }).run("od -An -tx1 -v | tr -d ' \\n'; echo; echo eof", { stdin: allBytes, stdout: out.sink });
    expect(exit.exitCode).toBe(0);
    expect(out.value()).toBe(`${allBytes.toString("hex")}\neof\n`);
    expect(vendor.calls).toEqual([{ op: "start" }]);
    expect(vendor.specs[0]!.stdin).toBe(false);
  });

  it("through executeCommand, an execute with stdin is one vendor call", async () => {
    const vendor = localVendor();
    const result = await executeCommand(createStreamedProcessRunner({ api: vendor.api }), { command: "cat", stdin: "hello\n" });
    expect(result).toMatchObject({ exitCode: 0, stdout: "hello\n", timedOut: false });
    expect(vendor.calls).toEqual([{ op: "start" }]);
  });

  it("stdin too large to inline goes in writes of at most maxStdinChunkBytes, then EOF", async () => {
    const vendor = localVendor();
    const big = Buffer.alloc(300_000, 0x61);
    const out = text();
    const exit = await createStreamedProcessRunner({ api: vendor.api, inlineStdinMaxBytes: 1024, maxStdinChunkBytes: 100_000 }).run("wc -c", { stdin: big, stdout: out.sink });
    expect(exit.exitCode).toBe(0);
    expect(out.value().trim()).toBe("300000");
    expect(vendor.calls.map((c) => c.op)).toEqual(["start", "write", "write", "write", "close"]);
    expect(vendor.calls.filter((c) => c.op === "write").every((c) => (c.bytes ?? 0) <= 100_000)).toBe(true);
  });

  it("a stream's chunks that queue up while a write is in flight are merged into fewer writes", async () => {
    const vendor = localVendor({ writeDelayMs: 30 });
    const source = new PassThrough();
    const out = text();
    const running = createStreamedProcessRunner({ api: vendor.api }).run("wc -c", { stdin: source, stdout: out.sink });
    for (let i = 0; i < 50; i++) {
      source.write(Buffer.alloc(1000, 0x62));
      await new Promise((resolve) => setImmediate(resolve));
    }
    source.end();
    const exit = await running;
    expect(exit.exitCode).toBe(0);
    expect(out.value().trim()).toBe("50000");
    expect(vendor.count("write")).toBeLessThan(10);
    expect(vendor.count("close")).toBe(1);
  });

  it("a process that exits while its stdin stream is still open does not hold the run", async () => {
    const vendor = localVendor();
    const source = new PassThrough();
    source.write("one\n");
    const exit = await createStreamedProcessRunner({ api: vendor.api }).run("head -n 1 >/dev/null; exit 0", { stdin: source });
    expect(exit.exitCode).toBe(0);
    source.end("more\n");
  });

  it("a Writable sink gets back-pressure and is ended at exit", async () => {
    const vendor = localVendor();
    const received: Buffer[] = [];
    let finished = false;
    const sink = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _encoding, callback) {
        received.push(chunk);
        setTimeout(callback, 1);
      },
      final(callback) {
        finished = true;
        callback();
      },
    });
    const exit = await createStreamedProcessRunner({ api: vendor.api }).run("head -c 200000 /dev/zero", { stdout: sink });
    expect(exit.exitCode).toBe(0);
    expect(finished).toBe(true);
    expect(Buffer.concat(received).length).toBe(200_000);
  });

  it("an abort signals the pid, SIGTERM then SIGKILL after the grace, and reports aborted", async () => {
    const vendor = localVendor();
    const controller = new AbortController();
    const running = createStreamedProcessRunner({ api: vendor.api }).run("trap '' TERM; exec sleep 30", { signal: controller.signal, killGraceMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    controller.abort();
    const exit = await running;
    expect(exit).toMatchObject({ exitCode: null, reason: "aborted" });
    expect(vendor.calls.filter((c) => c.op === "kill").map((c) => c.detail)).toEqual(["SIGTERM", "SIGKILL"]);
  });

  it("a signal that outlives the command sends no kill once the command has ended", async () => {
    const vendor = localVendor();
    const longLived = new AbortController();
    const exit = await createStreamedProcessRunner({ api: vendor.api }).run("exit 3", { signal: longLived.signal, killGraceMs: 10 });
    expect(exit).toMatchObject({ exitCode: 3, reason: "exit" });
    longLived.abort();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(vendor.count("kill")).toBe(0);
  });

  it("passes io.env as the vendor's env field, and a deadline only when it declares remoteTimeout", async () => {
    const vendor = localVendor();
    const out = text();
    await createStreamedProcessRunner({ api: vendor.api }).run('printf %s "$POST_CMD"', { env: { POST_CMD: "a b" }, stdout: out.sink, timeoutMs: 5000 });
    expect(out.value()).toBe("a b");
    expect(vendor.specs[0]!.timeoutMs).toBeUndefined();
    await createStreamedProcessRunner({ api: vendor.api, remoteTimeout: true }).run("true", { timeoutMs: 5000 });
    expect(vendor.specs[1]!.timeoutMs).toBe(5000);
  });

  it("rejects when the vendor cannot start the process (a transport failure, not an exit)", async () => {
    const api: StreamedProcessApi = { start: () => Promise.reject(new Error("connection refused")) };
    await expect(createStreamedProcessRunner({ api }).run("true", {})).rejects.toThrow("connection refused");
  });

  it("accepts a Readable made from an iterable", async () => {
    const vendor = localVendor();
    const out = text();
    await createStreamedProcessRunner({ api: vendor.api }).run("cat", { stdin: Readable.from([Buffer.from("a"), Buffer.from("b")]), stdout: out.sink });
    expect(out.value()).toBe("ab");
  });
});

describe("createStreamedProcessRunner over a vendor that takes stdin as one stream (feedStdin)", () => {
  it("hands it every byte of stdin, and fails the run when that stream breaks while the process waits for it", async () => {
    const fed: Buffer[] = [];
    const api: StreamedProcessApi = {
      async start(_spec, output) {
        let done!: (exit: StreamedProcessExit) => void;
        const exited = new Promise<StreamedProcessExit>((resolve) => (done = resolve));
        return {
          exited,
          async feedStdin(source) {
            for await (const chunk of source) fed.push(chunk);
            await output.stdout(Buffer.concat(fed));
            done({ exitCode: 0, signal: null });
          },
        };
      },
    };
    const out: Buffer[] = [];
    const exit = await createStreamedProcessRunner({ api, signals: "none", inlineStdinMaxBytes: 0 }).run("cat", {
      stdin: Readable.from([Buffer.from("a"), Buffer.from("b")]),
      stdout: (chunk) => out.push(chunk),
    });
    expect([Buffer.concat(out).toString(), exit.reason]).toEqual(["ab", "exit"]);

    const broken: StreamedProcessApi = { start: async () => ({ exited: new Promise<StreamedProcessExit>(() => undefined), feedStdin: () => Promise.reject(new Error("stdin stream reset")) }) };
    await expect(createStreamedProcessRunner({ api: broken, inlineStdinMaxBytes: 0 }).run("cat", { stdin: "x" })).rejects.toThrow("stdin stream reset");
  });
});
