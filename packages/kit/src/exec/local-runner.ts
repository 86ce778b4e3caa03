import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner } from "../transport.js";
import { killProcessGroup } from "./process-group.js";

export interface LocalScriptRunnerOptions {
  cwd: string;
  /** The complete environment of `sh` (nothing is inherited from the worker). */
  env: Record<string, string>;
  shell?: string;
  /** Called with the process group id of every script started (e.g. to end stragglers at release). */
  onSpawn?: (pgid: number) => void;
}

/** How long to keep reading stdout/stderr after the script exits, if a background child holds them open. */
const DRAIN_AFTER_EXIT_MS = 200;
const DEFAULT_KILL_GRACE_MS = 250;

/**
 * Runs scripts on this machine, each in its own session/process group (`detached: true`).
 *
 * Only an abort ends the group. When the script exits normally, background processes it started
 * keep running on purpose: the host starts long-lived helpers (e.g. its callback bridge) with one
 * execute and talks to them in later ones. Whoever owns the lifetime (lease release) ends them.
 */
export function createLocalScriptRunner(opts: LocalScriptRunnerOptions): ScriptRunner {
  const shell = opts.shell ?? "/bin/sh";
  return {
    capabilities: STREAM_TRANSPORT,
    run(script, io) {
      return new Promise<ScriptExit>((resolve, reject) => {
        const child = spawn(shell, ["-c", script], {
          cwd: opts.cwd,
          env: { ...opts.env, ...io.env },
          detached: true,
          stdio: ["pipe", "pipe", "pipe"],
        });
        let aborted = false;
        let killing: Promise<void> | undefined;
        const onAbort = () => {
          aborted = true;
          if (child.pid !== undefined) killing ??= killProcessGroup(child.pid, io.killGraceMs ?? DEFAULT_KILL_GRACE_MS);
        };

        child.once("error", (error) => {
          io.signal?.removeEventListener("abort", onAbort);
          reject(error);
        });
        child.once("spawn", () => {
          if (child.pid !== undefined) opts.onSpawn?.(child.pid);
          if (io.signal?.aborted) onAbort();
          else io.signal?.addEventListener("abort", onAbort, { once: true });
        });

        feedStdin(child.stdin, io.stdin);
        const outputs = [deliver(child.stdout, io.stdout), deliver(child.stderr, io.stderr)];

        child.once("exit", (exitCode, signal) => {
          io.signal?.removeEventListener("abort", onAbort);
          void Promise.all([settleOutputs(outputs), killing]).then(() =>
            resolve({ exitCode, signal, aborted, reason: aborted ? "aborted" : signal ? "signal" : "exit", pid: child.pid }),
          );
        });
      });
    },
  };
}

function feedStdin(stdin: Writable, input: ScriptIo["stdin"]): void {
  stdin.on("error", () => {
    // EPIPE: the script exited without reading all of its stdin; that is its choice.
  });
  if (input === undefined || input === null) stdin.end();
  else if (typeof input === "string" || Buffer.isBuffer(input)) stdin.end(input);
  else input.pipe(stdin);
}

interface Delivery {
  /** Resolves when every byte reached the sink (and a Writable sink finished). */
  done: Promise<void>;
  ended(): boolean;
  /** True while data is buffered or the sink asked us to wait; such a stream is not idle. */
  busy(): boolean;
  lastActivity: number;
  /** Stops reading (a background child keeps the pipe open) and ends the sink. */
  cut(): void;
}

/**
 * Delivers a child stream to a sink. A Writable sink gets back-pressure and is ended at EOF (as
 * `pipe()` does); if it fails it stops receiving data and its error stays with its owner.
 */
function deliver(source: Readable, sink: ScriptIo["stdout"]): Delivery {
  let ended = false;
  let sinkFailed = false;
  const writable = sink instanceof Writable ? sink : undefined;
  const delivery: Delivery = {
    done: Promise.resolve(),
    ended: () => ended,
    busy: () => source.readableLength > 0 || (writable !== undefined && !sinkFailed && writable.writableNeedDrain),
    lastActivity: Date.now(),
    cut: () => {
      source.destroy();
      if (writable && !sinkFailed) writable.end();
    },
  };
  const sourceDone = new Promise<void>((resolve) => {
    source.once("end", () => {
      ended = true;
      resolve();
    });
    source.once("close", resolve);
  });
  source.on("data", (chunk: Buffer) => {
    delivery.lastActivity = Date.now();
    if (typeof sink === "function") sink(chunk);
    else if (writable && !sinkFailed && !writable.write(chunk)) {
      source.pause();
      writable.once("drain", () => source.resume());
    }
  });
  if (writable) {
    writable.once("error", () => {
      sinkFailed = true;
      source.resume();
    });
    delivery.done = sourceDone.then(() => {
      if (sinkFailed || writable.writableFinished) return;
      return new Promise<void>((resolve) => {
        writable.once("finish", resolve);
        writable.once("close", resolve);
        writable.once("error", () => resolve());
        if (!writable.writableEnded) writable.end();
      });
    });
  } else {
    delivery.done = sourceDone;
  }
  return delivery;
}

/**
 * After the script exits, waits for its output. A stream that has not ended, holds no buffered data
 * and has been silent for DRAIN_AFTER_EXIT_MS is held open by a background child: stop reading it.
 */
async function settleOutputs(outputs: Delivery[]): Promise<void> {
  const allDone = Promise.all(outputs.map((o) => o.done));
  let finished = false;
  void allDone.then(() => (finished = true));
  while (!finished) {
    await Promise.race([allDone, sleepMs(20)]);
    const open = outputs.filter((o) => !o.ended());
    const now = Date.now();
    if (!finished && open.length > 0 && open.every((o) => !o.busy() && now - o.lastActivity >= DRAIN_AFTER_EXIT_MS)) {
      for (const o of open) o.cut();
      break;
    }
  }
  await allDone;
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
