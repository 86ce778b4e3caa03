// Vendor calls (and median time) per operation for each of the kit's transport adapters, over a
// simulated vendor whose engine runs our commands in a temp directory (the adapters' wire shapes,
// real commands). The host makes ~50 executes a short run: every extra call per execute is a round
// trip the user waits for. Targets: 1 call per plain execute, at most 2 with stdin, at most 2 per
// sync operation.
//   node bench/kit-transports.mjs [--runs 30]
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { PassThrough } from "node:stream";
import {
  STREAM_TRANSPORT,
  createBufferedRunner,
  createFileStdioRunner,
  createLocalScriptRunner,
  executeCommand,
  runSpawnedScript,
  syncFor,
  withInlineEnv,
  withLengthFramedStdin,
  withRemoteGroupKill,
} from "../packages/kit/dist/index.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "30" } } });
const runs = Number(values.runs);
const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "kit-transports-bench-")));
const sandbox = path.join(root, "sandbox");
const host = path.join(root, "host");
const scratch = path.join(root, "scratch");
for (const dir of [sandbox, host, scratch, path.join(sandbox, "tmp")]) fs.mkdirSync(dir, { recursive: true });
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: path.join(sandbox, "tmp"), HOME: sandbox };
const engine = createLocalScriptRunner({ cwd: sandbox, env });

let calls = 0;
const count = () => (calls += 1);
const collect = () => {
  const chunks = [];
  return { sink: (c) => chunks.push(c), bytes: () => Buffer.concat(chunks) };
};

const adapters = {
  "buffered (text, no signals)": () =>
    withRemoteGroupKill(
      createBufferedRunner({
        capabilities: { binarySafe: false, separateStderr: true, remoteTimeout: false },
        exec: async (r) => {
          count();
          const out = collect();
          const err = collect();
          const exit = await engine.run(r.script, { stdin: r.stdin ?? null, env: r.env, stdout: out.sink, stderr: err.sink });
          return { exitCode: exit.exitCode, stdout: out.bytes().toString("utf8"), stderr: err.bytes().toString("utf8") };
        },
      }),
    ),
  "file-stdio (no stdin, combined output, file API)": () => {
    const files = {
      upload: async (target, source, opts) => {
        count();
        await fsp.writeFile(target, source, { mode: opts?.mode ?? 0o644 });
      },
      download: async (target) => {
        count();
        return fs.createReadStream(target);
      },
    };
    const runner = withRemoteGroupKill(
      createFileStdioRunner({
        files,
        scratchDir: path.join(sandbox, "tmp"),
        exec: async (r) => {
          count();
          const out = collect();
          const exit = await engine.run(`exec 2>&1\n${r.command}`, { stdout: out.sink });
          return { exitCode: exit.exitCode, output: out.bytes().toString("latin1") };
        },
      }),
    );
    return { runner, files };
  },
  "streamed, pid-only signals": () =>
    withRemoteGroupKill({
      capabilities: { ...STREAM_TRANSPORT, signals: "pid" },
      run: (script, io) => {
        count();
        return runSpawnedScript({ file: "/bin/sh", args: ["-c", script], cwd: sandbox, env, terminate: async (child) => void child.kill("SIGKILL") }, io);
      },
    }),
  "streamed, stdin without EOF (length-framed)": () =>
    withLengthFramedStdin({
      capabilities: { ...STREAM_TRANSPORT, stdinEof: false },
      run: (script, io) => {
        count();
        const held = new PassThrough();
        const input = io.stdin;
        if (typeof input === "string" || Buffer.isBuffer(input)) held.write(input);
        else if (input) input.on("data", (c) => held.write(c));
        return engine.run(script, { ...io, stdin: held }).finally(() => held.end());
      },
    }),
  "streamed, no env field (inlined)": () =>
    withInlineEnv({
      capabilities: STREAM_TRANSPORT,
      run: (script, io) => {
        count();
        return engine.run(script, { ...io, env: undefined });
      },
    }),
};

// A host-style run-start upload: one tar FILE plus a post-upload command that extracts it.
const tree = path.join(host, "tree");
fs.mkdirSync(path.join(tree, "src"), { recursive: true });
for (let i = 0; i < 50; i++) fs.writeFileSync(path.join(tree, "src", `f${i}.txt`), `file ${i}\n`.repeat(50));
const { execFileSync } = await import("node:child_process");
const tarball = path.join(host, "workspace.tar");
execFileSync("tar", ["-cf", tarball, "-C", tree, "."]);
const remoteTree = path.join(sandbox, "tree");
const bigStdin = "x".repeat(200_000);

const operations = {
  "execute `true`": (runner) => executeCommand(runner, { command: "true" }),
  "execute with 1 KiB stdin": (runner) => executeCommand(runner, { command: "wc", args: ["-c"], stdin: "y".repeat(1024) }),
  "execute with 200 KB stdin": (runner) => executeCommand(runner, { command: "wc", args: ["-c"], stdin: bigStdin }),
  "sync in: tar file + post-upload extract": (runner, files) =>
    syncFor(runner, files).syncIn(
      [
        {
          operationId: "in",
          files: [{ sourcePath: tarball, targetPath: path.join(sandbox, "upload.tar"), kind: "file" }],
          postUploadCommands: [{ command: `mkdir -p '${remoteTree}' && tar -xf '${sandbox}/upload.tar' -C '${remoteTree}' && rm -f '${sandbox}/upload.tar'`, timeoutMs: 60_000 }],
        },
      ],
      { roots: [sandbox] },
    ),
  "sync in: directory": (runner, files) =>
    syncFor(runner, files).syncIn([{ operationId: "dir-in", files: [{ sourcePath: tree, targetPath: path.join(sandbox, "dir"), kind: "directory" }] }], { roots: [sandbox] }),
  "sync out: directory": async (runner, files) => {
    const target = await fsp.mkdtemp(path.join(host, "out-"));
    await syncFor(runner, files).syncOut([{ operationId: "out", files: [{ sourcePath: remoteTree, targetPath: path.join(target, "t"), kind: "directory" }] }], {
      roots: [sandbox],
      hostScratchDir: scratch,
    });
    await fsp.rm(target, { recursive: true, force: true });
  },
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};

const rows = [];
for (const [adapterName, make] of Object.entries(adapters)) {
  const made = make();
  const runner = "run" in made ? made : made.runner;
  const files = "run" in made ? undefined : made.files;
  const strategy = syncFor(runner, files).kind;
  for (const [opName, op] of Object.entries(operations)) {
    const counts = [];
    const times = [];
    for (let i = 0; i < runs; i++) {
      calls = 0;
      const started = performance.now();
      await op(runner, files);
      times.push(performance.now() - started);
      counts.push(calls);
    }
    rows.push({ adapter: adapterName, strategy, operation: opName, calls: median(counts), maxCalls: Math.max(...counts), ms: median(times) });
  }
}

console.log(`kit transport adapters: vendor calls and median time per operation (${runs} runs each)\n`);
const pad = (s, n) => String(s).padEnd(n);
console.log(`${pad("adapter", 48)} ${pad("sync", 9)} ${pad("operation", 42)} calls  time`);
for (const r of rows) {
  console.log(`${pad(r.adapter, 48)} ${pad(r.strategy, 9)} ${pad(r.operation, 42)} ${pad(r.calls === r.maxCalls ? r.calls : `${r.calls}-${r.maxCalls}`, 6)} ${r.ms.toFixed(1)} ms`);
}
fs.rmSync(root, { recursive: true, force: true });
