import { randomBytes } from "node:crypto";
import type { PtyHandle } from "@daytonaio/sdk";
import {
  awaitPtyStart,
  checkPtySignal,
  checkPtySize,
  endsWithin,
  hangUpPty,
  PtyStartLine,
  PtyUnavailableError,
  shellQuote,
  type PtyExit,
  type PtyProcess,
  type PtySignal,
  type PtyTransport,
  type ScriptRunner,
} from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import { NOT_RUN_STATUSES } from "./exec.js";
import type { DaytonaHandle } from "./sandboxes.js";

export interface DaytonaPtyOptions {
  /** How long the login shell may take to start the program (its profile runs first). Default 60 s. */
  startTimeoutMs?: number;
  /** Grace between the hang-up and the session's deletion when a terminal is closed with its program running. Default 1000 ms. */
  closeGraceMs?: number;
}

/** The daemon's terminal sizes: "must be less than 1000". */
const MAX_DIMENSION = 999;
/** The daemon reads at most 64 KiB per WebSocket message. */
const INPUT_CHUNK = 32 * 1024;
/** The variable that carries the wrapper into the shell (unset before the program runs). */
const CARRIER = "PAPERCLIP_PTY";

/**
 * Daytona's own pseudo-terminals (the toolbox's PTY sessions: `process.createPty`, one WebSocket with
 * the terminal's bytes both ways, `resizePtySession`, `killPtySession`). A session is the daemon's
 * interactive login shell, not a command: the wrapper travels in the session's envs and one typed
 * line (` exec /bin/sh -c "$PAPERCLIP_PTY"`) replaces the shell with it, so the program leads the
 * terminal's session and its exit is the session's. The wrapper prints a start line with a random
 * marker and its pid first: everything before it (the shell's profile output, prompt and the echo of
 * the typed line) is dropped, so the caller sees only the program's terminal. Signals other than
 * SIGKILL go to that pid's process group through the runner (the PTY API has only a kill, which
 * SIGKILLs the session's process tree).
 */
export function daytonaPty(client: DaytonaClient, handle: DaytonaHandle, runner: ScriptRunner, options: DaytonaPtyOptions = {}): PtyTransport {
  const startTimeoutMs = options.startTimeoutMs ?? 60_000;
  const closeGraceMs = options.closeGraceMs ?? 1_000;
  const process = () => handle.sandbox.process;

  return {
    async open(spec) {
      const size = checkPtySize(spec);
      if (size.cols > MAX_DIMENSION || size.rows > MAX_DIMENSION) throw new RangeError(`Daytona terminals are at most ${MAX_DIMENSION} columns and rows (got ${size.cols}x${size.rows})`);
      if (spec.signal?.aborted) throw new PtyUnavailableError("the PTY open was aborted");
      const id = `paperclip-pty-${randomBytes(8).toString("hex")}`;
      const startLine = new PtyStartLine((bytes) => spec.onData(bytes));
      const wrapper = [`unset ${CARRIER}`, startLine.shellLine, `exec /bin/sh -c ${shellQuote(spec.script)}`].join("; ");

      const pty: PtyHandle = await client.call(
        "createPty",
        () => process().createPty({ id, cols: size.cols, rows: size.rows, ...(spec.cwd ? { cwd: spec.cwd } : {}), envs: { ...spec.env, [CARRIER]: wrapper }, onData: (data) => startLine.push(data) }),
        { idempotent: false, attempts: 1, notProcessed: NOT_RUN_STATUSES },
      );
      const deleteSession = () => client.call("killPtySession", () => process().killPtySession(id), { idempotent: true, safeMethod: true }).catch(() => undefined);
      let ended = false;
      const exited: Promise<PtyExit> = pty.wait().then(
        (result) => exitOf(result.exitCode),
        () => ({ exitCode: null, signal: null }),
      );
      void exited.then(() => (ended = true));

      try {
        await pty.sendInput(` exec /bin/sh -c "$${CARRIER}"\n`);
        const outcome = await awaitPtyStart(startLine, exited, { timeoutMs: startTimeoutMs, ...(spec.signal ? { signal: spec.signal } : {}) });
        if (outcome !== "started") {
          const tail = startLine.startupTail();
          throw new PtyUnavailableError(
            outcome === "ended"
              ? `the sandbox's login shell ended before the program started${tail ? `: ${tail}` : ""}`
              : outcome === "aborted"
                ? "the PTY open was aborted"
                : `the program did not start on the terminal within ${startTimeoutMs} ms`,
          );
        }
      } catch (error) {
        await deleteSession();
        await pty.disconnect();
        throw error;
      }

      /** Signals the program's process group (it leads the terminal's session) with one runner call. */
      const signalGroup = async (signal: PtySignal) => {
        if (signal === "SIGKILL") return void (await deleteSession());
        const name = signal.slice(3);
        const pid = startLine.started!.pid;
        await runner.run(`kill -${name} -${pid} 2>/dev/null || kill -${name} ${pid} 2>/dev/null; exit 0`, {});
      };
      let writes: Promise<void> = Promise.resolve();
      let closing: Promise<void> | undefined;
      const result: PtyProcess = {
        exited,
        write(bytes) {
          const next = writes.then(async () => {
            if (ended || bytes.length === 0) return;
            for (let at = 0; at < bytes.length; at += INPUT_CHUNK) await pty.sendInput(new Uint8Array(bytes.subarray(at, at + INPUT_CHUNK)));
          });
          writes = next.catch(() => undefined);
          return next.catch((error: unknown) => {
            throw client.error(error, "sendPtyInput");
          });
        },
        async resize(next) {
          const checked = checkPtySize(next);
          if (checked.cols > MAX_DIMENSION || checked.rows > MAX_DIMENSION)
            throw new RangeError(`Daytona terminals are at most ${MAX_DIMENSION} columns and rows (got ${checked.cols}x${checked.rows})`);
          if (ended) return;
          await client.call("resizePtySession", () => pty.resize(checked.cols, checked.rows), { idempotent: true });
        },
        async kill(signal = "SIGTERM") {
          checkPtySignal(signal);
          if (ended) return;
          await signalGroup(signal);
        },
        close() {
          closing ??= (async () => {
            if (!ended) {
              // The session's deletion is the hard end (SIGKILL to its tree).
              await hangUpPty({ exited, signalGroup, forceEnd: deleteSession, graceMs: closeGraceMs });
            }
            await endsWithin(exited, closeGraceMs);
            await pty.disconnect();
            await exited;
          })();
          return closing;
        },
      };
      return result;
    },
  };
}

/** The daemon's exit code: the program's own, 128 + n for a signal n (137 when the session was killed). */
function exitOf(exitCode: number | undefined): PtyExit {
  if (exitCode === undefined || exitCode < 0) return { exitCode: null, signal: null };
  return { exitCode, signal: null };
}
