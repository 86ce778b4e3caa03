import { randomBytes } from "node:crypto";
import type { PtyHandle } from "@daytonaio/sdk";
import { shellQuote, startLinePty, type PtyExit, type PtySize, type PtyTransport, type ScriptRunner } from "@paperclip-sandbox/kit";
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
  const process = () => handle.sandbox.process;
  return startLinePty({
    runner,
    launcher: "the sandbox's login shell",
    maxSize: { dimension: MAX_DIMENSION, vendor: "Daytona" },
    writeError: (error) => client.error(error, "sendPtyInput"),
    ...options,
    async launch(spec, size, startLine) {
      const id = `paperclip-pty-${randomBytes(8).toString("hex")}`;
      const wrapper = [`unset ${CARRIER}`, startLine.shellLine, `exec /bin/sh -c ${shellQuote(spec.script)}`].join("; ");
      const pty: PtyHandle = await client.call(
        "createPty",
        () => process().createPty({ id, cols: size.cols, rows: size.rows, ...(spec.cwd ? { cwd: spec.cwd } : {}), envs: { ...spec.env, [CARRIER]: wrapper }, onData: (data) => startLine.push(data) }),
        { idempotent: false, attempts: 1, notProcessed: NOT_RUN_STATUSES },
      );
      // The session's deletion is the hard end (SIGKILL to its tree).
      const deleteSession = async () => {
        await client.call("killPtySession", () => process().killPtySession(id), { idempotent: true, safeMethod: true }).catch(() => undefined);
      };
      const terminal = {
        exited: pty.wait().then(
          (result) => exitOf(result.exitCode),
          () => ({ exitCode: null, signal: null }),
        ),
        async write(bytes: Buffer) {
          for (let at = 0; at < bytes.length; at += INPUT_CHUNK) await pty.sendInput(new Uint8Array(bytes.subarray(at, at + INPUT_CHUNK)));
        },
        resize: async (next: PtySize) => void (await client.call("resizePtySession", () => pty.resize(next.cols, next.rows), { idempotent: true })),
        forceEnd: deleteSession,
        dispose: () => pty.disconnect(),
      };
      try {
        await pty.sendInput(` exec /bin/sh -c "$${CARRIER}"\n`);
      } catch (error) {
        await deleteSession();
        await pty.disconnect();
        throw error;
      }
      return terminal;
    },
  });
}

/** The daemon's exit code: the program's own, 128 + n for a signal n (137 when the session was killed). */
function exitOf(exitCode: number | undefined): PtyExit {
  if (exitCode === undefined || exitCode < 0) return { exitCode: null, signal: null };
  return { exitCode, signal: null };
}
