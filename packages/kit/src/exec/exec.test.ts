import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { STREAM_TRANSPORT, type ScriptRunner } from "../transport.js";
import { buildExecScript, createLocalScriptRunner, MAX_LOG_CHUNK_CHARS, executeCommand, EXIT_CWD_MISSING, killProcessGroup, processGroupAlive, shellQuote } from "./index.js";

const root = mkdtempSync(join(tmpdir(), "kit-exec-test-"));
const spawned: number[] = [];
const runner = createLocalScriptRunner({
  cwd: root,
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: root },
  onSpawn: (pgid) => spawned.push(pgid),
});

afterAll(async () => {
  for (const pgid of spawned) await killProcessGroup(pgid, 50);
  rmSync(root, { recursive: true, force: true });
});

const hostile = ["plain", "with space", "it's", 'say "hi"', "line1\nline2", "$HOME `id` $(id) \\ ;|&<>*?", "ünïcødé 🚀", "", "-n"];

describe("shellQuote", () => {
  it("round-trips hostile strings through a real shell", async () => {
    const result = await executeCommand(runner, { command: "printf", args: ["%s\\0", ...hostile] });
    expect(result.exitCode).toBe(0);
    expect(result.stdout.split("\0").slice(0, -1)).toEqual(hostile);
  });

  it("refuses NUL bytes with a clear error", () => {
    expect(() => shellQuote("a\0b")).toThrow(/NUL byte/);
  });
});

describe("buildExecScript", () => {
  it("keeps the common no-stdin script to a single line reading /dev/null", () => {
    expect(buildExecScript({ command: "echo", args: ["hi"] })).toBe("exec 'echo' 'hi' </dev/null");
  });

  it("rejects environment names a shell cannot export, naming the key", () => {
    expect(() => buildExecScript({ command: "true", env: { "BAD-NAME": "x" } })).toThrow(/"BAD-NAME"/);
    expect(() => buildExecScript({ command: "true", env: { "1X": "x" } })).toThrow(/"1X"/);
  });

  it("treats the command as one program name, not a shell line", async () => {
    const result = await executeCommand(runner, { command: "echo hi; touch pwned" });
    expect(result.exitCode).toBe(127);
    expect(readdirSync(root)).not.toContain("pwned");
  });
});

describe("executeCommand with the local runner", () => {
  it("passes env values verbatim and runs in cwd", async () => {
    const dir = mkdtempSync(join(root, "cwd-"));
    const result = await executeCommand(runner, {
      command: "sh",
      args: ["-c", 'printf "%s|%s" "$GREETING" "$(pwd)"'],
      cwd: dir,
      env: { GREETING: "it's $HOME `x`" },
    });
    expect(result.stdout).toBe(`it's $HOME \`x\`|${dir}`);
  });

  it("fails clearly when cwd is missing", async () => {
    const result = await executeCommand(runner, { command: "true", cwd: join(root, "nope") });
    expect(result.exitCode).toBe(EXIT_CWD_MISSING);
    expect(result.stderr).toContain("working directory");
    expect(result.stderr).toContain(join(root, "nope"));
  });

  it("feeds stdin through a staged file that is gone afterwards", async () => {
    const input = "first line\nsecond 'quoted' $line ✓\n";
    const result = await executeCommand(runner, { command: "sh", args: ["-c", "[ -f /dev/stdin ] && cat"], stdin: input });
    expect(result.stdout).toBe(input);
    expect(readdirSync(root).filter((name) => name.startsWith(".paperclip-stdin"))).toEqual([]);
  });

  it("stages stdin in a 0600 file in the requested directory, unlinked before the command runs", async () => {
    const staging = mkdtempSync(join(root, "staging-"));
    const script = buildExecScript({ command: "sh", args: ["-c", "stat -L -c %a /dev/stdin; readlink /proc/self/fd/0"], stdin: "x" }, { stdinDir: staging });
    const out: Buffer[] = [];
    const exit = await runner.run(script, { stdin: "x", stdout: (c) => out.push(c) });
    expect(exit.exitCode).toBe(0);
    const [mode, target] = Buffer.concat(out).toString().trim().split("\n");
    expect(mode).toBe("600");
    expect(target).toMatch(new RegExp(`^${staging}/\\.paperclip-stdin\\.\\w+ \\(deleted\\)$`));
    expect(readdirSync(staging)).toEqual([]);
  });

  it("gives an empty stdin when stdin is the empty string, /dev/null when absent", async () => {
    const empty = await executeCommand(runner, { command: "wc", args: ["-c"], stdin: "" });
    expect(empty.stdout.trim()).toBe("0");
    const absent = await executeCommand(runner, { command: "readlink", args: ["/proc/self/fd/0"] });
    expect(absent.stdout.trim()).toBe("/dev/null");
  });

  it("returns exit codes and keeps stderr separate", async () => {
    const result = await executeCommand(runner, { command: "sh", args: ["-c", "echo out; echo err >&2; exit 3"] });
    expect(result).toMatchObject({ exitCode: 3, timedOut: false, stdout: "out\n", stderr: "err\n" });
    expect(result.metadata?.durationMs).toEqual(expect.any(Number));
  });

  it("reports a signal death with a null exit code", async () => {
    const result = await executeCommand(runner, { command: "sh", args: ["-c", "kill -KILL $$"] });
    expect(result).toMatchObject({ exitCode: null, signal: "SIGKILL", timedOut: false });
  });

  it("on timeout ends the whole process group, background children included", async () => {
    const pidFile = join(root, "bg-timeout.pid");
    const before = spawned.length;
    const result = await executeCommand(runner, { command: "sh", args: ["-c", `sleep 30 & echo $! > ${pidFile}; echo started; wait`], timeoutMs: 300 }, { killGraceMs: 100 });
    expect(result).toMatchObject({ exitCode: null, timedOut: true, stdout: "started\n" });
    expect(result.signal).toMatch(/^SIG/);
    const pgid = spawned[before]!;
    expect(processGroupAlive(pgid)).toBe(false);
  });

  it("escalates to SIGKILL when the group ignores SIGTERM", async () => {
    const before = spawned.length;
    const started = Date.now();
    const result = await executeCommand(runner, { command: "sh", args: ["-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"], timeoutMs: 200 }, { killGraceMs: 100 });
    expect(result.timedOut).toBe(true);
    expect(processGroupAlive(spawned[before]!)).toBe(false);
    // A bound far from the alternative (a slow machine is not a failure): without the escalation it never ends.
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it("lets a background process outlive the execute that started it", async () => {
    const pidFile = join(root, "bg.pid");
    const result = await executeCommand(runner, { command: "sh", args: ["-c", `sleep 30 >/dev/null 2>&1 & echo $! > ${pidFile}`] });
    expect(result.exitCode).toBe(0);
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    expect(() => process.kill(pid, 0)).not.toThrow();
  });

  it("returns promptly even if a background child keeps stdout open", async () => {
    const started = Date.now();
    const result = await executeCommand(runner, { command: "sh", args: ["-c", "sleep 30 & echo done"] });
    expect(result.stdout).toBe("done\n");
    // A bound far from the alternative (a slow machine is not a failure): waiting for the child takes 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it("stops the command when the caller's signal aborts", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const result = await executeCommand(runner, { command: "sleep", args: ["30"] }, { signal: controller.signal, killGraceMs: 50 });
    expect(result).toMatchObject({ exitCode: null, timedOut: false });
  });

  it("streams live output to log", async () => {
    const seen: string[] = [];
    await executeCommand(runner, { command: "sh", args: ["-c", "echo a; echo b >&2"] }, { log: (s, t) => seen.push(`${s}:${t}`) });
    expect(seen.sort()).toEqual(["stderr:b\n", "stdout:a\n"]);
  });

  it("stdout sinks that are Writables receive every byte and are ended", async () => {
    const { PassThrough } = await import("node:stream");
    const sink = new PassThrough();
    const chunks: Buffer[] = [];
    sink.on("data", (c: Buffer) => chunks.push(c));
    const exit = await runner.run("head -c 3000000 /dev/zero", { stdout: sink });
    expect(exit.exitCode).toBe(0);
    expect(Buffer.concat(chunks).length).toBe(3_000_000);
    expect(sink.writableEnded).toBe(true);
  });
});

/** A runner that replays fixed chunks, to test decoding and capping without processes. */
function replayRunner(stdoutChunks: Buffer[]): ScriptRunner {
  return {
    capabilities: STREAM_TRANSPORT,
    async run(_script, io) {
      for (const chunk of stdoutChunks) (io.stdout as (c: Buffer) => void)(chunk);
      return { exitCode: 0, signal: null, reason: "exit" };
    },
  };
}

describe("executeCommand output handling", () => {
  it("never splits a multibyte character across chunks", async () => {
    const bytes = Buffer.from("é🚀ü", "utf8");
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    const seen: string[] = [];
    const result = await executeCommand(replayRunner(chunks), { command: "x" }, { log: (_s, t) => seen.push(t) });
    expect(result.stdout).toBe("é🚀ü");
    expect(seen.join("")).toBe("é🚀ü");
    expect(seen.every((t) => !t.includes("\uFFFD"))).toBe(true);
  });

  it("splits a large buffered delivery into live-output pieces of at most 64 KiB, never splitting a character", async () => {
    const text = `${"x".repeat(MAX_LOG_CHUNK_CHARS - 1)}😀${"y".repeat(200_000)}`;
    const pieces: string[] = [];
    const result = await executeCommand(replayRunner([Buffer.from(text)]), { command: "x" }, { log: (_s, t) => pieces.push(t) });
    expect(pieces.length).toBeGreaterThan(3);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(MAX_LOG_CHUNK_CHARS);
    expect(pieces.join("")).toBe(text);
    expect(pieces[0]?.endsWith("x")).toBe(true);
    expect(result.stdout).toBe(text);
  });

  it("keeps the head of oversized output and notes the truncation", async () => {
    const result = await executeCommand(replayRunner([Buffer.from("abcdef"), Buffer.from("ghij")]), { command: "x" }, { maxOutputBytes: 8 });
    expect(result.stdout).toBe("abcdefgh");
    expect(result.metadata?.truncated).toEqual({ stdout: { keptBytes: 8, droppedBytes: 2 } });
  });

  it("drops a character cut in half by the cap instead of emitting a replacement", async () => {
    const result = await executeCommand(replayRunner([Buffer.from("ab🚀", "utf8")]), { command: "x" }, { maxOutputBytes: 4 });
    expect(result.stdout).toBe("ab");
  });

  it("applies annotateStderr to the final stderr", async () => {
    const failing: ScriptRunner = {
      capabilities: STREAM_TRANSPORT,
      async run(_s, io) {
        (io.stderr as (c: Buffer) => void)(Buffer.from("boom\n"));
        return { exitCode: 1, signal: null, reason: "exit" };
      },
    };
    const result = await executeCommand(failing, { command: "x" }, { annotateStderr: (s) => `${s}note\n` });
    expect(result.stderr).toBe("boom\nnote\n");
  });
});

describe("ProcessGroupSet", () => {
  it("ends the background leftovers of finished scripts", async () => {
    const { ProcessGroupSet } = await import("./index.js");
    const groups = new ProcessGroupSet();
    const tracked = createLocalScriptRunner({ cwd: root, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, onSpawn: (g) => groups.add(g) });
    await executeCommand(tracked, { command: "sh", args: ["-c", "sleep 30 >/dev/null 2>&1 &"] });
    await executeCommand(tracked, { command: "true" });
    const leftovers = groups.alive();
    expect(leftovers).toHaveLength(1);
    await groups.endAll(50);
    expect(processGroupAlive(leftovers[0]!)).toBe(false);
  });
});
