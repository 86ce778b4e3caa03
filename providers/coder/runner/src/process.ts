/**
 * One command of the runner: `/bin/bash --noprofile --norc -c <script>` in a process group of its
 * own, with exactly the caller's environment (nothing of the runner's is inherited), stdin piped or
 * closed, a deadline that ends the whole group, and an exit reported once the output is delivered.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import type { Readable, Writable } from "node:stream";

export interface CommandSpec {
  script: string;
  /** The command's whole environment (`envMode: "replace"`). */
  env: Record<string, string>;
  cwd: string;
  /** Ends the group (SIGTERM, SIGKILL after `killGraceMs`) at this deadline; the exit says `timedOut`. */
  timeoutMs?: number;
  killGraceMs: number;
}

interface CommandExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
}

export interface RunningCommand {
  readonly pid: number;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Settles when the process exited and its output ended (or went quiet: a background child holds it). */
  readonly exited: Promise<CommandExit>;
  /** SIGTERM to the group, SIGKILL after the grace (0: at once). */
  kill(graceMs?: number): void;
}

/** After exit, output still open but silent this long is held by a background child: stop waiting. */
const DRAIN_AFTER_EXIT_MS = 200;
const BASH = "/bin/bash";
const BASH_ARGS = ["--noprofile", "--norc", "-c"];

/** Starts the command; rejects when it cannot start (a missing cwd, no bash). */
export function startCommand(spec: CommandSpec): Promise<RunningCommand> {
  return new Promise((resolve, reject) => {
    let child: ChildProcessWithoutNullStreams;
    try {
      child = spawn(BASH, [...BASH_ARGS, spec.script], { cwd: spec.cwd, env: spec.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    } catch (error) {
      reject(error);
      return;
    }
    child.once("error", reject);
    child.once("spawn", () => {
      child.off("error", reject);
      child.on("error", () => undefined);
      resolve(wrap(child, spec));
    });
  });
}

function wrap(child: ChildProcessWithoutNullStreams, spec: CommandSpec): RunningCommand {
  const pid = child.pid!;
  let timedOut = false;
  let killTimer: NodeJS.Timeout | undefined;
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pid, signal);
    } catch {
      // The group is gone already.
    }
  };
  const kill = (graceMs = spec.killGraceMs) => {
    signalGroup("SIGTERM");
    if (killTimer) return;
    killTimer = setTimeout(() => signalGroup("SIGKILL"), Math.max(0, graceMs));
    killTimer.unref();
  };
  const deadline = spec.timeoutMs ? setTimeout(() => ((timedOut = true), kill()), spec.timeoutMs) : undefined;
  // The stdin pipe may break (the command exited without reading): that is the command's business.
  child.stdin.on("error", () => undefined);

  const exited = new Promise<CommandExit>((resolve) => {
    child.once("exit", (code, signal) => {
      if (deadline) clearTimeout(deadline);
      void outputSettled([child.stdout, child.stderr]).then(() => {
        // Background processes the script started stay (a server it launched must outlive it);
        // only a timeout or an abort ends the group.
        if (killTimer) clearTimeout(killTimer);
        resolve({ exitCode: timedOut || signal ? null : code, signal: signal ?? null, timedOut });
      });
    });
  });
  return { pid, stdin: child.stdin, stdout: child.stdout, stderr: child.stderr, exited, kill };
}

/** Resolves when every stream ended, or none has carried data for DRAIN_AFTER_EXIT_MS while flowing. */
function outputSettled(streams: Readable[]): Promise<void> {
  return new Promise((resolve) => {
    let open = streams.filter((stream) => !stream.readableEnded).length;
    if (open === 0) return resolve();
    let timer: NodeJS.Timeout | undefined;
    const quiet = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(done, DRAIN_AFTER_EXIT_MS);
    };
    const done = () => {
      if (timer) clearTimeout(timer);
      // A consumer that is still taking output (paused by back-pressure, or with bytes buffered) is
      // waited for: only a stream that is flowing and silent counts as held by a background child.
      if (streams.some((stream) => !stream.readableEnded && !stream.destroyed && (stream.isPaused() || stream.readableLength > 0))) {
        quiet();
        return;
      }
      for (const stream of streams) {
        stream.off("data", quiet);
        // A background child's output past this point is dropped, never waited for.
        if (!stream.readableEnded) stream.destroy();
      }
      resolve();
    };
    for (const stream of streams) {
      if (stream.readableEnded) continue;
      stream.on("data", quiet);
      stream.once("end", () => {
        open -= 1;
        if (open === 0) done();
      });
    }
    quiet();
  });
}
