// The command channel over real processes on this machine: the local runner stands in for a
// vendor's exec (each "fresh exec" is a new `sh -c`), and the multiplexer runs as it would in a
// sandbox. Faults are made for real: the multiplexer is killed, the stream is cut, pipes are filled.
import { AsyncLocalStorage } from "node:async_hooks";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { PassThrough, Readable, Writable } from "node:stream";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { createLocalScriptRunner } from "../../exec/local/local-runner.js";
import { findMarkedProcesses, endMarkedProcesses } from "../../exec/local/process-marker.js";
import { isZombieOrGone } from "../../exec/local/proc-stat.js";
import { withRemoteGroupKill } from "../remote-group-kill.js";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner } from "../../transport.js";
import { cuttable } from "./__fixtures__/cuttable.js";
import { CommandChannelLostError, closeCommandChannel, commandChannelCarriesSync, commandChannelStatus, withCommandChannel, type CommandChannelOptions } from "./index.js";

const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-channel-"));
const MARKER = "PAPERCLIP_CHANNEL_TEST";
const leases: string[] = [];

afterEach(async () => {
  for (const lease of leases.splice(0)) {
    await closeCommandChannel(lease);
    await endMarkedProcesses(MARKER, lease);
  }
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

interface Sandbox {
  lease: string;
  dir: string;
  tmp: string;
  local: ScriptRunner;
}

/** A "sandbox": a directory, and a runner whose every command carries the lease's marker. */
function sandbox(capabilities: Partial<ScriptRunner["capabilities"]> = {}): Sandbox {
  const lease = `lease-${randomUUID()}`;
  leases.push(lease);
  const dir = path.join(root, lease);
  const tmp = path.join(dir, "tmp");
  fs.mkdirSync(tmp, { recursive: true });
  const runner = createLocalScriptRunner({ cwd: dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, TMPDIR: tmp, [MARKER]: lease } });
  return { lease, dir, tmp, local: { capabilities: { ...runner.capabilities, ...capabilities }, run: runner.run } };
}

function channel(box: Sandbox, inner: ScriptRunner = box.local, options: Partial<CommandChannelOptions> = {}): ScriptRunner {
  return withCommandChannel(inner, { lease: box.lease, restartDelayMs: 0, ackTimeoutMs: 5_000, ...options });
}

interface Ran {
  exit: ScriptExit;
  stdout: string;
  stderr: string;
}

async function run(runner: ScriptRunner, script: string, io: ScriptIo = {}): Promise<Ran> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const exit = await runner.run(script, { stdout: (c) => out.push(c), stderr: (c) => err.push(c), ...io });
  return { exit, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") };
}

/** Runs `true` once (a fresh exec that starts the channel) and waits until the channel is ready. */
async function warm(box: Sandbox, runner: ScriptRunner): Promise<number> {
  await run(runner, "true");
  await vi.waitFor(() => expect(commandChannelStatus(box.lease).state).toBe("ready"), { timeout: 20_000, interval: 20 });
  return commandChannelStatus(box.lease).pid!;
}

/** Running (a zombie waiting for its reaper has ended). */
const alive = (pid: number) => !isZombieOrGone(pid);

describe("command channel: a fresh exec's semantics over one multiplexer", () => {
  it("runs the first command fresh, starts the channel beside it, and runs later commands over it", async () => {
    const box = sandbox();
    const runner = channel(box);
    const first = await run(runner, "echo one");
    expect(first.stdout).toBe("one\n");
    const muxPid = await warm(box, runner);
    for (let i = 0; i < 5; i++) expect((await run(runner, `echo ${i}`)).stdout).toBe(`${i}\n`);
    const status = commandChannelStatus(box.lease);
    expect(status).toMatchObject({ state: "ready", starts: 1, overChannel: 5, breaks: 0 });
    expect(status.fresh).toBe(2);
    expect(status.implementation).toMatch(/^node v\d+/);
    expect(commandChannelStatus(box.lease).pid).toBe(muxPid);
  });

  it("cannot be told apart from a fresh exec: environment, cwd, umask, signals, fds, session, exit codes, stderr", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const probe = [
      "env | sort",
      "pwd; umask; ulimit -n",
      "grep -E '^(SigIgn|SigBlk)' /proc/self/status",
      "ps -o pgid= -o sid= -p $$ | awk -v me=$$ '{print ($1 == me && $2 == me)}'",
      "printf 'to stderr' >&2",
      "exit 7",
    ].join("; ");
    const fresh = await run(box.local, probe, { env: { EXTRA: "a 'quoted' value" } });
    const over = await run(runner, probe, { env: { EXTRA: "a 'quoted' value" } });
    expect(commandChannelStatus(box.lease).overChannel).toBe(1);
    expect(over.stdout).toBe(fresh.stdout);
    expect(over.stderr).toBe(fresh.stderr);
    expect({ ...over.exit, pid: 0 }).toEqual({ ...fresh.exit, pid: 0 });
    expect(over.stdout).toContain("EXTRA=a 'quoted' value");
    expect(over.stdout).toMatch(/\n1\n$/); // a process group and session of its own
  });

  it("delivers output in the async context of the command's caller, not of whoever started the channel", async () => {
    const box = sandbox();
    const runner = channel(box);
    const invocation = new AsyncLocalStorage<string>();
    await invocation.run("first", () => warm(box, runner));
    const seen: Array<string | undefined> = [];
    const exit = await invocation.run("second", () => runner.run("echo out; echo err >&2", { stdout: () => seen.push(invocation.getStore()), stderr: () => seen.push(invocation.getStore()) }));
    expect(exit.exitCode).toBe(0);
    expect(commandChannelStatus(box.lease).overChannel).toBe(1);
    expect(seen).toEqual(["second", "second"]);
  });

  it("a command killed by a signal reports as the fresh exec it replaces: the signal's name, or 128 + n under the group-kill wrapper", async () => {
    const box = sandbox();
    const native = channel(box);
    await warm(box, native);
    const fresh = await run(box.local, "kill -9 $$");
    const over = await run(native, "kill -9 $$");
    expect(over.exit).toMatchObject({ exitCode: null, signal: "SIGKILL", reason: "signal" });
    expect({ ...over.exit, pid: 0 }).toEqual({ ...fresh.exit, pid: 0 });

    const wrappedBox = sandbox();
    const wrapped = withRemoteGroupKill(wrappedBox.local);
    const wrappedChannel = channel(wrappedBox, wrapped, { signalsAsExitStatus: true });
    await warm(wrappedBox, wrappedChannel);
    const wrappedFresh = await run(wrapped, "kill -9 $$");
    const wrappedOver = await run(wrappedChannel, "kill -9 $$");
    expect(commandChannelStatus(wrappedBox.lease).overChannel).toBe(1);
    expect(wrappedOver.exit).toMatchObject({ exitCode: 137, signal: null, reason: "exit" });
    expect({ ...wrappedOver.exit, pid: 0 }).toEqual({ ...wrappedFresh.exit, pid: 0 });
  });

  it("carries every byte value both ways, with inline and streamed stdin", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const big = Buffer.concat(Array.from({ length: 4096 }, () => every)); // 1 MiB: streamed
    for (const stdin of [every, big, Readable.from([every.subarray(0, 100), every.subarray(100)])]) {
      const out: Buffer[] = [];
      const exit = await runner.run("cat", { stdin, stdout: (c) => out.push(c) });
      expect(exit.exitCode).toBe(0);
      const expected = Buffer.isBuffer(stdin) ? stdin : every;
      expect(Buffer.concat(out).equals(expected)).toBe(true);
    }
    expect(commandChannelStatus(box.lease).overChannel).toBe(3);
  });

  it("runs commands at once without one holding the others", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => run(runner, `sleep 0.0${i % 5}; echo ${i}; echo e${i} >&2; exit ${i}`)));
    results.forEach((r, i) => {
      expect(r.stdout).toBe(`${i}\n`);
      expect(r.stderr).toBe(`e${i}\n`);
      expect(r.exit.exitCode).toBe(i);
    });
    expect(commandChannelStatus(box.lease).overChannel).toBe(12);
  });

  it("delivers output live, before the command ends", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const flag = path.join(box.dir, "go");
    let seen = "";
    const running = runner.run(`echo first; while [ ! -e ${flag} ]; do sleep 0.02; done; echo second`, {
      stdout: (c) => {
        seen += c.toString();
        if (seen === "first\n") fs.writeFileSync(flag, "");
      },
    });
    const exit = await running;
    expect(exit.exitCode).toBe(0);
    expect(seen).toBe("first\nsecond\n");
  });

  it("an abort ends the command's whole process group, background children included", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const pidFile = path.join(box.dir, "child.pid");
    const controller = new AbortController();
    const running = runner.run(`sleep 60 & echo $! > ${pidFile}; wait`, { signal: controller.signal });
    await vi.waitFor(() => expect(fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim().length > 0).toBe(true), { timeout: 10_000, interval: 10 });
    const child = Number(fs.readFileSync(pidFile, "utf8"));
    controller.abort();
    const exit = await running;
    expect(exit).toMatchObject({ exitCode: null, reason: "aborted" });
    await vi.waitFor(() => expect(alive(child)).toBe(false), { timeout: 5_000, interval: 20 });
  });

  it("ends the group at the deadline when the runner declares a remote timeout, and says it timed out", async () => {
    const box = sandbox({ remoteTimeout: true });
    const runner = channel(box);
    await warm(box, runner);
    const exit = await runner.run("sleep 30", { timeoutMs: 200 });
    expect(exit).toMatchObject({ exitCode: null, reason: "timeout" });
    expect(findMarkedProcesses(MARKER, box.lease).length).toBeGreaterThan(0); // the multiplexer itself
    expect(commandChannelStatus(box.lease).overChannel).toBe(1);
  });

  it("returns while a background child still holds stdout, and the child keeps running", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const pidFile = path.join(box.dir, "bg.pid");
    const result = await run(runner, `sleep 30 & echo $! > ${pidFile}; echo done`);
    expect(result.stdout).toBe("done\n");
    expect(alive(Number(fs.readFileSync(pidFile, "utf8")))).toBe(true);
  });

  it("back-pressure: a slow Writable receives all of a large output while quick commands finish", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    let received = 0;
    let mostBuffered = 0;
    const slow = new Writable({
      highWaterMark: 64 * 1024,
      write(chunk: Buffer, _enc, done) {
        received += chunk.length;
        mostBuffered = Math.max(mostBuffered, slow.writableLength);
        setTimeout(done, 2);
      },
    });
    const size = 24 * 1024 * 1024;
    let bigDone = false;
    const big = runner.run(`head -c ${size} /dev/zero`, { stdout: slow }).then((exit) => ((bigDone = true), exit));
    const quick = await Promise.all(Array.from({ length: 5 }, (_, i) => run(runner, `echo quick${i}`)));
    expect(quick.map((q) => q.stdout)).toEqual(["quick0\n", "quick1\n", "quick2\n", "quick3\n", "quick4\n"]);
    expect(bigDone).toBe(false);
    expect((await big).exitCode).toBe(0);
    expect(received).toBe(size);
    // The multiplexer waits for credit: what piles up on the host stays near one window (1 MiB).
    expect(mostBuffered).toBeLessThan(4 * 1024 * 1024);
  });
});

describe("command channel: faults", () => {
  it("the multiplexer killed mid-command: the command is reported lost, its group ended, later commands run and the channel comes back", async () => {
    const box = sandbox();
    const runner = channel(box);
    const muxPid = await warm(box, runner);
    const pidFile = path.join(box.dir, "victim.pid");
    const running = run(runner, `sleep 60 & echo $! > ${pidFile}; wait`);
    await vi.waitFor(() => expect(fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim().length > 0).toBe(true), { timeout: 10_000, interval: 10 });
    const victim = Number(fs.readFileSync(pidFile, "utf8"));
    process.kill(muxPid, "SIGKILL");
    await expect(running).rejects.toBeInstanceOf(CommandChannelLostError);
    expect(alive(victim)).toBe(false);
    expect((await run(runner, "echo after")).stdout).toBe("after\n");
    await vi.waitFor(() => expect(commandChannelStatus(box.lease).state).toBe("ready"), { timeout: 20_000, interval: 20 });
    expect(commandChannelStatus(box.lease)).toMatchObject({ breaks: 1, starts: 2 });
    expect(commandChannelStatus(box.lease).pid).not.toBe(muxPid);
    expect((await run(runner, "echo over")).stdout).toBe("over\n");
    expect(fs.readdirSync(box.tmp)).toHaveLength(1); // only the new channel's state directory
  });

  it("the multiplexer killed between commands: the next command still runs, once", async () => {
    const box = sandbox();
    const runner = channel(box);
    const muxPid = await warm(box, runner);
    process.kill(muxPid, "SIGKILL");
    const log = path.join(box.dir, "ran.log");
    const result = await run(runner, `echo x >> ${log}; echo ok`);
    expect(result.stdout).toBe("ok\n");
    expect(fs.readFileSync(log, "utf8")).toBe("x\n");
  });

  it("a cut stream with commands in flight: none is lost, none runs twice, nothing is left running", async () => {
    const box = sandbox();
    const cut = cuttable(box.local);
    const runner = channel(box, cut.runner);
    await warm(box, runner);
    const log = path.join(box.dir, "ran.log");
    const runs = Array.from({ length: 16 }, (_, i) => run(runner, `echo ${i} >> ${log}; sleep 0.${i % 4}; echo ${i}`));
    await new Promise((resolve) => setTimeout(resolve, 50));
    cut.cutAll();
    const settled = await Promise.allSettled(runs);
    const lines = fs.readFileSync(log, "utf8").trim().split("\n").map(Number);
    settled.forEach((outcome, i) => {
      const times = lines.filter((n) => n === i).length;
      if (outcome.status === "fulfilled") {
        expect(outcome.value.stdout).toBe(`${i}\n`);
        expect(times).toBe(1);
      } else {
        expect(outcome.reason).toBeInstanceOf(CommandChannelLostError);
        expect(times).toBeLessThanOrEqual(1);
      }
    });
    // Only the restarted channel (if any) may remain.
    await vi.waitFor(() => expect(findMarkedProcesses(MARKER, box.lease).filter((pid) => !isChannel(pid))).toEqual([]), { timeout: 10_000, interval: 50 });
  });

  it("a cut before the command was acknowledged: it runs as a fresh exec, exactly once", async () => {
    const box = sandbox();
    const cut = cuttable(box.local);
    const runner = channel(box, cut.runner);
    await warm(box, runner);
    cut.holdInput(); // requests stop reaching the sandbox
    const log = path.join(box.dir, "ran.log");
    const running = run(runner, `echo x >> ${log}; echo ok`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    cut.cutAll();
    expect((await running).stdout).toBe("ok\n");
    expect(fs.readFileSync(log, "utf8")).toBe("x\n");
  });

  it("a hung channel (requests never answered) is ended after the acknowledgement timeout; the command runs fresh once", async () => {
    const box = sandbox();
    const cut = cuttable(box.local);
    const runner = channel(box, cut.runner, { ackTimeoutMs: 300 });
    await warm(box, runner);
    cut.holdInput();
    const log = path.join(box.dir, "ran.log");
    expect((await run(runner, `echo x >> ${log}; echo ok`)).stdout).toBe("ok\n");
    expect(fs.readFileSync(log, "utf8")).toBe("x\n");
    expect(commandChannelStatus(box.lease).breaks).toBe(1);
  });

  it("garbage on the channel's stream ends the channel: the command in flight is reported lost, later commands run", async () => {
    const box = sandbox();
    const cut = cuttable(box.local);
    const runner = channel(box, cut.runner);
    await warm(box, runner);
    const pidFile = path.join(box.dir, "victim.pid");
    const running = run(runner, `echo $$ > ${pidFile}; sleep 30`);
    await vi.waitFor(() => expect(fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim().length > 0).toBe(true), { timeout: 10_000, interval: 10 });
    cut.inject("Z not the protocol\n");
    await expect(running).rejects.toBeInstanceOf(CommandChannelLostError);
    expect(alive(Number(fs.readFileSync(pidFile, "utf8")))).toBe(false);
    expect((await run(runner, "echo fine")).stdout).toBe("fine\n");
  });

  it("a command that never reads a large stdin does not block the channel", async () => {
    const box = sandbox();
    const runner = channel(box);
    await warm(box, runner);
    const flood = Readable.from(
      (function* () {
        for (let i = 0; i < 64; i++) yield Buffer.alloc(256 * 1024, i);
      })(),
    );
    const stuck = runner.run("sleep 1; echo slept", { stdin: flood });
    expect((await run(runner, "echo meanwhile")).stdout).toBe("meanwhile\n");
    expect((await stuck).exitCode).toBe(0);
    const head = await run(runner, "head -c 5", { stdin: Buffer.alloc(2 * 1024 * 1024, 0x61) });
    expect(head.stdout).toBe("aaaaa");
  });

  it("no interpreter for the in-sandbox side: every command runs fresh, and the start is not retried", async () => {
    const box = sandbox();
    const runner = channel(box, box.local, { implementations: [] });
    await run(runner, "true");
    await vi.waitFor(() => expect(commandChannelStatus(box.lease).state).toBe("unavailable"), { timeout: 10_000, interval: 20 });
    for (let i = 0; i < 3; i++) expect((await run(runner, `echo ${i}`)).stdout).toBe(`${i}\n`);
    expect(commandChannelStatus(box.lease)).toMatchObject({ starts: 1, overChannel: 0, fresh: 4 });
    expect(commandChannelStatus(box.lease).reason).toMatch(/none runs here/);
  });

  it("a transport without streamed stdin or live output gets its runner back unchanged", () => {
    const box = sandbox();
    const buffered = { ...box.local, capabilities: { ...STREAM_TRANSPORT, stdin: "buffered" as const } };
    expect(channel(box, buffered)).toBe(buffered);
    expect(withCommandChannel(box.local, { lease: box.lease, enabled: false })).toBe(box.local);
  });
});

describe("command channel: lifetime", () => {
  it("an idle channel closes: the multiplexer exits and its state directory goes; the next command starts another", async () => {
    const box = sandbox();
    const runner = channel(box, box.local, { idleMs: 100 });
    const muxPid = await warm(box, runner);
    await vi.waitFor(() => expect(alive(muxPid)).toBe(false), { timeout: 10_000, interval: 20 });
    await vi.waitFor(() => expect(commandChannelStatus(box.lease).state).toBe("none"), { timeout: 10_000, interval: 20 });
    expect(fs.readdirSync(box.tmp)).toEqual([]);
    expect(commandChannelStatus(box.lease).breaks).toBe(0);
    await warm(box, runner);
    expect(commandChannelStatus(box.lease).starts).toBe(2);
  });

  it("closeCommandChannel (release) ends the multiplexer and leaves no process or file behind", async () => {
    const box = sandbox();
    const runner = channel(box);
    const muxPid = await warm(box, runner);
    expect((await run(runner, "echo hi")).stdout).toBe("hi\n");
    await closeCommandChannel(box.lease);
    expect(alive(muxPid)).toBe(false);
    expect(findMarkedProcesses(MARKER, box.lease)).toEqual([]);
    expect(fs.readdirSync(box.tmp)).toEqual([]);
    expect(commandChannelStatus(box.lease).state).toBe("none");
  });

  it("closeCommandChannel lets a command in flight finish, even past the close timeout (5 s), then ends the multiplexer", async () => {
    const box = sandbox();
    const runner = channel(box);
    const muxPid = await warm(box, runner);
    await closeWhileRunning(box, runner, 6);
    expect(alive(muxPid)).toBe(false);
    expect(findMarkedProcesses(MARKER, box.lease)).toEqual([]);
  });
});

/** Closes the lease's channel while a command of `seconds` runs over it: that command finishes, the channel is gone. */
async function closeWhileRunning(box: Sandbox, runner: ScriptRunner, seconds: number): Promise<void> {
  let stdout = "";
  const long = runner.run(`echo started; sleep ${seconds}; echo survived`, { stdout: (chunk) => (stdout += chunk.toString("utf8")) });
  // Running over the channel (its first line arrived) when the release closes it.
  await vi.waitFor(() => expect(stdout).toBe("started\n"), { timeout: 20_000, interval: 20 });
  await closeCommandChannel(box.lease);
  const exit = await long;
  expect({ exitCode: exit.exitCode, stdout }).toEqual({ exitCode: 0, stdout: "started\nsurvived\n" });
  expect(commandChannelStatus(box.lease).state).toBe("none");
}

describe("command channel: a carrier of its own (a raw terminal: no EOF, its input's end ends it)", () => {
  /** The local runner as a terminal: input never reaches EOF; its end aborts the exec at once. */
  function terminalLike(box: Sandbox, starts: { count: number }): ScriptRunner {
    return {
      capabilities: box.local.capabilities,
      run(script, io) {
        starts.count += 1;
        const input = new PassThrough();
        const cut = new AbortController();
        const source = io.stdin as Readable;
        source.on("data", (chunk: Buffer) => input.write(chunk));
        source.on("end", () => cut.abort());
        io.signal?.addEventListener("abort", () => cut.abort(), { once: true });
        return box.local.run(script, { ...io, stdin: input, signal: cut.signal });
      },
    };
  }

  it("runs the long exec on the carrier and fresh execs on inner; a close lets a command in flight finish, then the multiplexer quits", async () => {
    const box = sandbox();
    const starts = { count: 0 };
    let fresh = 0;
    const inner: ScriptRunner = { capabilities: box.local.capabilities, run: (script, io) => ((fresh += 1), box.local.run(script, io)) };
    const runner = channel(box, inner, { carrier: terminalLike(box, starts) });
    const muxPid = await warm(box, runner);
    expect({ starts: starts.count, fresh }).toEqual({ starts: 1, fresh: 1 });
    expect((await run(runner, "echo over")).stdout).toBe("over\n");
    expect(fresh).toBe(1);
    await closeWhileRunning(box, runner, 1);
    expect(alive(muxPid)).toBe(false);
    // It quit on its own (a clean exit removes its state directory).
    expect(fs.readdirSync(box.tmp).filter((name) => name.startsWith(".paperclip-cc-"))).toEqual([]);
  });

  it("carriesSync false: a ready channel does not carry sync", async () => {
    const box = sandbox();
    const runner = channel(box, box.local, { carrier: terminalLike(box, { count: 0 }), carriesSync: false });
    await warm(box, runner);
    expect(commandChannelCarriesSync(box.lease)).toBe(false);
    const other = sandbox();
    await warm(other, channel(other));
    expect(commandChannelCarriesSync(other.lease)).toBe(true);
  });
});

function isChannel(pid: number): boolean {
  try {
    return (
      fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("paperclip-channel") ||
      fs.readFileSync(`/proc/${pid}/comm`, "utf8").startsWith("paperclip-chann") ||
      fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("__pc_d=")
    );
  } catch {
    return false;
  }
}
