import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { STREAM_TRANSPORT, type ScriptExit, type ScriptIo, type ScriptRunner } from "../../transport.js";

export interface RecordingRunner extends ScriptRunner {
  /** Every script run, in order (for asserting how many calls a strategy made). */
  scripts: string[];
  /** Largest stdin (bytes) handed to a single call, when it was a Buffer or string. */
  maxStdinBytes: number;
}

/**
 * A ScriptRunner backed by a local `sh -c` child in `cwd`: the test "sandbox" is just a host temp
 * directory. It follows the transport contract: own process group, stdin then EOF, ordered sinks,
 * abort ends the group (TERM, then KILL after the grace period).
 */
export function createTestScriptRunner(cwd: string, baseEnv: Record<string, string> = {}): RecordingRunner {
  const runner: RecordingRunner = {
    capabilities: STREAM_TRANSPORT,
    scripts: [],
    maxStdinBytes: 0,
    run(script: string, io: ScriptIo): Promise<ScriptExit> {
      runner.scripts.push(script);
      return new Promise<ScriptExit>((resolve, reject) => {
        const child = spawn("sh", ["-c", script], {
          cwd,
          env: { ...process.env, ...baseEnv, ...io.env },
          detached: true,
          stdio: ["pipe", "pipe", "pipe"],
        });
        let aborted = false;
        let killTimer: NodeJS.Timeout | undefined;
        const killGroup = (signal: NodeJS.Signals) => {
          try {
            if (child.pid !== undefined) process.kill(-child.pid, signal);
          } catch {
            // already gone
          }
        };
        const onAbort = () => {
          aborted = true;
          killGroup("SIGTERM");
          killTimer = setTimeout(() => killGroup("SIGKILL"), io.killGraceMs ?? 250);
        };
        if (io.signal?.aborted) onAbort();
        else io.signal?.addEventListener("abort", onAbort, { once: true });

        child.stdin.on("error", () => {}); // EPIPE when the script exits without reading
        const stdin = io.stdin;
        if (stdin === undefined || stdin === null) child.stdin.end();
        else if (typeof stdin === "string" || Buffer.isBuffer(stdin)) {
          runner.maxStdinBytes = Math.max(runner.maxStdinBytes, Buffer.byteLength(stdin));
          child.stdin.end(stdin);
        } else {
          (stdin as Readable).on("error", () => child.stdin.destroy());
          (stdin as Readable).pipe(child.stdin);
        }

        const sink = (stream: Readable, target: ScriptIo["stdout"]) =>
          new Promise<void>((done) => {
            if (target === undefined) {
              stream.resume();
            } else if (typeof target === "function") {
              stream.on("data", (chunk: Buffer) => target(chunk));
            } else {
              stream.pipe(target as Writable, { end: false });
            }
            stream.on("end", () => done());
            stream.on("close", () => done());
          });
        const delivered = Promise.all([sink(child.stdout, io.stdout), sink(child.stderr, io.stderr)]);
        child.on("error", reject);
        child.on("close", (code, signal) => {
          void delivered.then(() => {
            if (killTimer !== undefined) clearTimeout(killTimer);
            io.signal?.removeEventListener("abort", onAbort);
            resolve({ exitCode: code, signal, reason: aborted ? "aborted" : signal ? "signal" : "exit" });
          });
        });
      });
    },
  };
  return runner;
}
