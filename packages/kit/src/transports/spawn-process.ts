import { spawn, type ChildProcess } from "node:child_process";
import { killProcessGroup } from "../exec/local/process-group.js";
import type { ScriptExit, ScriptIo } from "../transport.js";
import { deliverStream, settleAfterExit, type StreamDelivery } from "./stream-delivery.js";
import { ExitMarkerScanner } from "./exit-marker.js";
import { feedStdin } from "./stdin-feed.js";

export interface SpawnedScriptOptions {
  /** The local program that runs the script: `sh` itself, or a client such as `ssh` or `kubectl`. */
  file: string;
  args: string[];
  cwd?: string;
  /** The complete environment of the spawned process (nothing is inherited). */
  env: Record<string, string>;
  /**
   * Ends the script when `io.signal` aborts. Default: SIGTERM then SIGKILL to the spawned process's
   * own process group (it is started detached). A remote client passes a function that also ends
   * the remote group, e.g. through `withRemoteGroupKill`.
   */
  terminate?: (child: ChildProcess, graceMs: number) => Promise<void>;
  /** Called with the pid (= process group id) of every process started. */
  onSpawn?: (pid: number) => void;
  /**
   * For clients that cannot tell when the remote script exited while a background child still holds
   * its output open (OpenSSH keeps such a channel open): the remote command prints
   * `exitMarkerLine(marker, status)` on stderr as its last act, and that line is taken as the exit.
   */
  exitMarker?: string;
  /**
   * With `exitMarker`: the client exited without printing it (and was not aborted), so the remote
   * script's outcome is unknown (a dropped connection). The run rejects with this error instead of
   * reporting the client's own exit status as the script's.
   */
  missingExitMarker?: (clientExit: { exitCode: number | null; signal: NodeJS.Signals | null }) => Error;
}

/** After exit, a stream that holds no data and stays silent this long is held open by a background child. */
export const DRAIN_AFTER_EXIT_MS = 200;
/** After an exit marker, how long the client's own exit (the channel's end) is waited for. */
const MARKER_EXIT_WAIT_MS = 1_000;
/** After an exit marker, the silence that means a background child holds the output open. */
const MARKER_DRAIN_MS = 2_000;
const DEFAULT_KILL_GRACE_MS = 250;

/**
 * Runs one script through a local process with the ScriptRunner semantics: stdin then EOF, ordered
 * delivery with back-pressure to Writable sinks, an abort that ends the whole group, and no hang on
 * output a background child keeps open. Local runners and client-process runners (ssh, kubectl) share it.
 */
export function runSpawnedScript(opts: SpawnedScriptOptions, io: ScriptIo): Promise<ScriptExit> {
  return new Promise<ScriptExit>((resolve, reject) => {
    const child = spawn(opts.file, opts.args, {
      cwd: opts.cwd,
      env: { ...opts.env, ...io.env },
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    const graceMs = io.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
    const terminate = opts.terminate ?? ((proc: ChildProcess, grace: number) => killOwnGroup(proc, grace));
    let aborted = false;
    let killing: Promise<void> | undefined;
    let settled = false;
    const onAbort = () => {
      aborted = true;
      if (child.pid !== undefined) killing ??= terminate(child, graceMs).catch(() => undefined);
    };
    const finish = (exit: ScriptExit) => {
      if (settled) return;
      settled = true;
      io.signal?.removeEventListener("abort", onAbort);
      resolve(exit);
    };

    child.once("error", (error) => {
      io.signal?.removeEventListener("abort", onAbort);
      if (!settled) {
        settled = true;
        reject(error);
      }
    });
    child.once("spawn", () => {
      if (child.pid !== undefined) opts.onSpawn?.(child.pid);
      if (io.signal?.aborted) onAbort();
      else io.signal?.addEventListener("abort", onAbort, { once: true });
    });

    feedStdin(child.stdin, io.stdin);
    const marker = opts.exitMarker === undefined ? undefined : new ExitMarkerScanner(opts.exitMarker);
    const outputs: StreamDelivery[] = [deliverStream(child.stdout, io.stdout), deliverStream(child.stderr, io.stderr, marker?.filter)];

    const exited = async (exitCode: number | null, signal: NodeJS.Signals | null, drainMs = DRAIN_AFTER_EXIT_MS) => {
      await Promise.all([settleAfterExit(outputs, drainMs), killing]);
      finish({ exitCode, signal, reason: aborted ? "aborted" : signal ? "signal" : "exit", ...(child.pid === undefined ? {} : { pid: child.pid }) });
    };
    // The remote script's own exit, announced in-band: the local client may not exit while a remote
    // background child keeps the channel open, so stop waiting for it and end the client. The marker
    // can outrun the last stdout bytes (stdout and stderr travel apart, and an ssh multiplexing
    // master still writes what it buffered after its client has exited): the client's own exit is
    // waited for a moment, and output is judged held open only after a longer silence.
    const clientExit = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    marker?.onExit((status) => {
      void Promise.race([clientExit, new Promise((resolve) => setTimeout(resolve, MARKER_EXIT_WAIT_MS).unref())])
        .then(() => exited(status, null, MARKER_DRAIN_MS))
        .then(() => child.kill("SIGKILL"));
    });
    child.once("exit", (exitCode, signal) => {
      if (marker?.seen) return;
      if (marker && opts.missingExitMarker && !aborted) {
        // The client's exit can be seen before its last stderr bytes: judge once the output is in.
        // A marker that arrives meanwhile allows the longer silence (the marker's own wait runs too).
        void Promise.all([settleAfterExit(outputs, () => (marker.seen ? MARKER_DRAIN_MS : DRAIN_AFTER_EXIT_MS)), killing]).then(() => {
          if (settled || marker.seen) return;
          settled = true;
          io.signal?.removeEventListener("abort", onAbort);
          reject(opts.missingExitMarker!({ exitCode, signal }));
        });
        return;
      }
      void exited(exitCode, signal);
    });
  });
}

async function killOwnGroup(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.pid !== undefined) await killProcessGroup(child.pid, graceMs);
}
