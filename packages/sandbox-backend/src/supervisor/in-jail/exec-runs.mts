/**
 * Exec runs (`exec`): commands whose stdout and stderr are kept in bounded, offset-addressable
 * rings here in the supervisor, so any connection (of this worker or a later one) can read them
 * from an offset, follow them live, write stdin, signal, or learn the exit, by pid. A `detached`
 * run outlives the connection that started it; a plain one ends when that connection is lost.
 * Finished runs stay readable until reaped, evicted (oldest first, past MAX_FINISHED or the
 * buffer budget), or replaced by a new run that got the same pid.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { constants as osConstants } from "node:os";
import { statSync, writeFileSync } from "node:fs";
import { OpError } from "./conversation.mjs";
import { OutputRing } from "./output-ring.mjs";
import { graceFrom, killGroup, outputGrace, preferForOom, reportedSignal, shellCommand, throughReaper, type GroupTarget } from "./process-group.mjs";
import type { SupervisorConfig } from "./config.mjs";

export type StreamName = "stdout" | "stderr";

interface ExecExit {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
}

export interface ExecRun extends GroupTarget {
  id: string;
  pid: number;
  tag: string | null;
  argv: string[] | null;
  script: string | null;
  cwd: string;
  detached: boolean;
  startedAt: number;
  child: ChildProcess;
  output: Record<StreamName, OutputRing>;
  stdinOpen: boolean;
  processExited: boolean;
  /** Set once the process has exited and its output is closed. */
  exit: ExecExit | null;
  finishedAt: number | null;
  timedOut: boolean;
  /** Called on every change: output appended or closed, exit. */
  listeners: Set<() => void>;
}

export interface ExecTable {
  start(message: Record<string, unknown>): Promise<ExecRun>;
  byPid(pid: number): ExecRun | undefined;
  list(): Array<Record<string, unknown>>;
  reap(pid: number): void;
  signal(pid: number, signal: unknown, group: boolean): void;
  killAll(graceMs: number): Promise<string[]>;
  readonly runningCount: number;
}

/** Runs kept (running and finished together). */
const MAX_RUNS = 1024;
/** Finished runs kept readable before the oldest is evicted. */
const MAX_FINISHED = 256;
/** Sum of the ring capacities of all kept runs (the rings fill lazily; this bounds the worst case). */
const CAPACITY_BUDGET = 256 * 1024 * 1024;
const MAX_ARGV = 4096;
/** Linux's MAX_ARG_STRLEN (32 pages): execve refuses a longer single argument with E2BIG. */
const MAX_ARG_BYTES = 32 * 4096;
const MAX_ENV = 1024;
const MAX_TAG = 256;

export function createExecTable(config: SupervisorConfig): ExecTable {
  const runs = new Map<number, ExecRun>();
  const notify = (run: ExecRun) => {
    for (const listener of [...run.listeners]) listener();
  };
  const capacityInUse = () => {
    let total = 0;
    for (const run of runs.values()) total += run.output.stdout.capacity + run.output.stderr.capacity;
    return total;
  };
  const evictOldestFinished = (): boolean => {
    for (const run of runs.values()) {
      if (run.exit) {
        runs.delete(run.pid);
        return true;
      }
    }
    return false;
  };

  const start = async (message: Record<string, unknown>): Promise<ExecRun> => {
    const command = parseCommand(message);
    const limit = outputLimit(message.outputLimitBytes, config);
    const cwd = typeof message.cwd === "string" ? message.cwd : config.defaultCwd;
    checkCwd(cwd);
    const env = { ...config.baseEnv, ...parseEnv(message.env) };
    while (runs.size >= MAX_RUNS || capacityInUse() + 2 * limit > CAPACITY_BUDGET) {
      if (!evictOldestFinished()) throw new OpError("ENOBUFS", "too many commands are running (or their output buffers are full)");
    }
    const withStdin = message.stdin === true;
    const direct = command.argv ? { file: command.argv[0]!, args: command.argv.slice(1), env } : shellCommand(command.script!, env);
    const file = direct.file;
    const invocation = throughReaper(config.reaper, direct, cwd);
    const child = spawn(invocation.file, invocation.args, { cwd, env: invocation.env, detached: true, stdio: [withStdin ? "pipe" : "ignore", "pipe", "pipe"] });
    if (child.pid === undefined) {
      const error = await new Promise<Error>((resolve) => child.once("error", resolve));
      const code = (error as NodeJS.ErrnoException).code ?? "EFAIL";
      throw new OpError(code, code === "ENOENT" ? `command not found: ${file}` : code === "E2BIG" ? "argument list too long" : `spawn failed: ${error.message}`);
    }
    child.on("error", () => undefined);
    preferForOom(child.pid, writeFileSync);
    const run: ExecRun = {
      id: typeof message.id === "string" ? message.id.slice(0, 64) : String(child.pid),
      pid: child.pid,
      pgid: child.pid,
      killing: null,
      tag: typeof message.tag === "string" ? message.tag.slice(0, MAX_TAG) : null,
      argv: command.argv,
      script: command.script,
      cwd,
      detached: message.detached === true,
      startedAt: Date.now(),
      child,
      output: { stdout: new OutputRing(limit), stderr: new OutputRing(limit) },
      stdinOpen: withStdin,
      processExited: false,
      exit: null,
      finishedAt: null,
      timedOut: false,
      listeners: new Set(),
    };
    // A finished run whose pid came round again can no longer be addressed: the new one replaces it.
    runs.delete(run.pid);
    runs.set(run.pid, run);
    child.stdin?.on("error", () => undefined); // EPIPE when the command does not read its stdin

    for (const name of ["stdout", "stderr"] as const) {
      child[name]!.on("data", (chunk: Buffer) => {
        if (run.output[name].ended) return; // drained after the exit: nobody can be given it any more
        run.output[name].append(chunk);
        notify(run);
      });
    }
    const streamEnded = (name: StreamName) =>
      new Promise<void>((resolve) => {
        child[name]!.once("end", resolve);
        child[name]!.once("close", resolve);
      }).then(() => {
        run.output[name].close();
        notify(run);
      });
    const streamsEnded = Promise.all([streamEnded("stdout"), streamEnded("stderr")]);

    let timer: NodeJS.Timeout | null = null;
    const timeoutMs = typeof message.timeoutMs === "number" && Number.isFinite(message.timeoutMs) ? message.timeoutMs : 0;
    if (timeoutMs > 0) {
      timer = setTimeout(
        () => {
          run.timedOut = true;
          void killGroup(run, graceFrom(message.killGraceMs));
        },
        Math.min(timeoutMs, 2 ** 31 - 1),
      );
    }

    child.once("exit", (code, signal) => {
      if (timer) clearTimeout(timer);
      run.processExited = true;
      run.stdinOpen = false;
      void (async () => {
        await Promise.race([streamsEnded, outputGrace()]);
        if (run.killing) await run.killing;
        run.output.stdout.close();
        run.output.stderr.close();
        run.exit = { code, signal: reportedSignal(run, signal), timedOut: run.timedOut };
        run.finishedAt = Date.now();
        notify(run);
        let finished = 0;
        for (const kept of runs.values()) if (kept.exit) finished += 1;
        while (finished > MAX_FINISHED && evictOldestFinished()) finished -= 1;
      })();
    });
    return run;
  };

  return {
    start,
    byPid: (pid) => runs.get(pid),
    list: () => [...runs.values()].map(describeRun),
    reap(pid) {
      const run = runs.get(pid);
      if (!run) throw new OpError("ESRCH", `no command with pid ${pid}`);
      if (!run.exit) throw new OpError("EBUSY", `command ${pid} is still running`);
      runs.delete(pid);
    },
    signal(pid, signal, group) {
      const run = runs.get(pid);
      if (!run) throw new OpError("ESRCH", `no command with pid ${pid}`);
      const sig = parseSignal(signal);
      if (!group && run.processExited) throw new OpError("ESRCH", `command ${pid} has exited`);
      try {
        process.kill(group ? -run.pgid : run.pid, sig);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? "EFAIL";
        throw new OpError(code, code === "ESRCH" ? `no process of command ${pid} is left` : (error as Error).message);
      }
    },
    async killAll(graceMs) {
      const targets = [...runs.values()].filter((run) => !run.processExited);
      await Promise.all(targets.map((run) => killGroup(run, graceMs)));
      return targets.map((run) => run.id);
    },
    get runningCount() {
      let count = 0;
      for (const run of runs.values()) if (!run.exit) count += 1;
      return count;
    },
  };
}

export function describeRun(run: ExecRun): Record<string, unknown> {
  return {
    pid: run.pid,
    tag: run.tag,
    // Previews only: a listing of many runs must stay far below the control frame cap.
    argv: run.argv ? run.argv.slice(0, 256).map((arg) => arg.slice(0, 4096)) : null,
    script: run.script === null ? null : run.script.slice(0, 4096),
    cwd: run.cwd,
    detached: run.detached,
    startedAt: run.startedAt,
    running: run.exit === null,
    exit: run.exit,
    stdinOpen: run.stdinOpen,
    output: {
      stdout: { start: run.output.stdout.start, end: run.output.stdout.end },
      stderr: { start: run.output.stderr.start, end: run.output.stderr.end },
    },
  };
}

function parseCommand(message: Record<string, unknown>): { argv: string[] | null; script: string | null } {
  if (Array.isArray(message.argv)) {
    const argv = message.argv;
    if (argv.length === 0 || argv.length > MAX_ARGV || !argv.every((arg) => typeof arg === "string" && !arg.includes("\0"))) {
      throw new OpError("EINVAL", `argv must be 1-${MAX_ARGV} strings without NUL bytes`);
    }
    // What execve itself answers (strerror(E2BIG)), so callers see the kernel's refusal, not ours.
    if (argv.some((arg) => Buffer.byteLength(arg as string) >= MAX_ARG_BYTES)) throw new OpError("E2BIG", "argument list too long");
    return { argv: argv as string[], script: null };
  }
  if (typeof message.script === "string" && !message.script.includes("\0")) return { argv: null, script: message.script };
  throw new OpError("EINVAL", "an exec needs argv (array of strings) or script (string)");
}

function parseEnv(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new OpError("EINVAL", "env must be an object of strings");
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_ENV) throw new OpError("EINVAL", `env may have at most ${MAX_ENV} variables`);
  for (const [name, text] of entries) {
    if (typeof text !== "string" || name.includes("=") || name.includes("\0") || text.includes("\0")) {
      throw new OpError("EINVAL", "env names and values must be strings without NUL (names without '=')");
    }
  }
  return value as Record<string, string>;
}

function outputLimit(value: unknown, config: SupervisorConfig): number {
  const max = config.maxOutputLimitBytes ?? 16 * 1024 * 1024;
  if (value === undefined || value === null) return Math.min(config.outputLimitBytes ?? 1024 * 1024, max);
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    throw new OpError("EINVAL", `outputLimitBytes must be an integer in [1, ${max}]`);
  }
  return value;
}

function checkCwd(cwd: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(cwd).isDirectory();
  } catch {
    throw new OpError("ENOENT", `cwd ${cwd} does not exist`);
  }
  if (!isDirectory) throw new OpError("ENOTDIR", `cwd ${cwd} is not a directory`);
}

function parseSignal(value: unknown): NodeJS.Signals | number {
  if (typeof value === "string" && Object.prototype.hasOwnProperty.call(osConstants.signals, value)) return value as NodeJS.Signals;
  if (typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= 64) return value;
  throw new OpError("EINVAL", `unknown signal ${String(value).slice(0, 32)}`);
}
