import { randomBytes } from "node:crypto";
import {
  createStreamedProcessRunner,
  isProviderApiError,
  launchedPty,
  retryDelay,
  shellQuote,
  STREAM_TRANSPORT,
  withInlineEnv,
  withRemoteGroupKill,
  withRetry,
  withStagedStdin,
  type PtyTransport,
  type ScriptRunner,
  type StreamedProcessApi,
  type TransportCapabilities,
} from "@paperclip-sandbox/kit";
import type { BoxdApi } from "./api.js";

/**
 * Known stdin up to this size rides inside the command (one Exec call); larger stdin is staged
 * through the file API (one more call). The command is one argument of the guest's `sh -c`, which
 * Linux caps at 128 KiB, so the base64 of this much stays well inside it.
 */
export const BOXD_INLINE_STDIN_BYTES = 32 * 1024;
/** A command longer than this is staged as a file too, and a short bootstrap runs it. */
export const BOXD_MAX_COMMAND_BYTES = 96 * 1024;

/** Every command appends its nonce here as it starts (read back only after a failed call). */
const START_LOG = "/tmp/.paperclip-exec-started";
/** Attempts of one Exec refused or cut before it started. */
const EXEC_ATTEMPTS = 4;

const pause = (attempt: number, error: { retryAfterMs?: number }) => new Promise((resolve) => setTimeout(resolve, retryDelay(attempt, {}, Math.random, error.retryAfterMs)));

/** Streamed both ways over one bidi `Exec` per command; a timeout or abort ends the remote group: the full contract. */
export const BOXD_TRANSPORT: TransportCapabilities = STREAM_TRANSPORT;

/** The runner's contract plus login terminals (`Exec` with `tty`). */
export const BOXD_PTY_TRANSPORT: TransportCapabilities = Object.freeze({ ...BOXD_TRANSPORT, pty: true });

/** What the runner needs of a machine: its API, its id, and what is known about its agent. */
export interface BoxdTarget {
  api: BoxdApi;
  id: string;
  /** Its agent predates the file API (learned from the first UNIMPLEMENTED; kept for the lease). */
  agent: { legacy: boolean };
}

/** The one-call Exec for `argv`: `sh -c <script>` is sent as the script itself (boxd runs it with sh). */
function commandOf(argv: readonly string[]): string {
  if (argv.length === 3 && argv[0] === "/bin/sh" && argv[1] === "-c") return argv[2]!;
  return argv.map(shellQuote).join(" ");
}

/**
 * Writes a private file in the machine: the file API creates it 0600; a machine whose agent
 * predates that API gets a 0700 directory first (one Exec) and the old upload (0644, inside it).
 */
async function stageFile(target: BoxdTarget, where: { dir: string; path: string }, bytes: Buffer, signal: AbortSignal | undefined, run: (command: string) => Promise<number | null>): Promise<void> {
  if (!target.agent.legacy) {
    try {
      await target.api.writeFile(target.id, where.path, bytes, 0o600, signal);
      return;
    } catch (error) {
      if (!(isProviderApiError(error) && error.code === "unimplemented")) throw error;
      target.agent.legacy = true;
    }
  }
  const made = await run(`umask 077 && mkdir -p -m 700 -- ${shellQuote(where.dir)}`);
  if (made !== 0) throw new Error(`boxd: could not make the staging directory ${where.dir} (exit ${made})`);
  await target.api.uploadFile(target.id, where.path, bytes, signal);
}

/**
 * The ScriptRunner of a boxd machine: one `Exec` per command (stdin and output streamed, stderr
 * apart), small stdin inline, larger stdin staged in a 0600 file, env as exports, and a timeout or
 * abort ending the command's whole process group (a setsid wrapper and a second Exec to kill it,
 * plus the call's cancel, which boxd turns into a group kill too).
 */
export function createBoxdRunner(target: BoxdTarget): ScriptRunner {
  const runRaw = async (command: string): Promise<number | null> => {
    const call = await target.api.exec(target.id, command, { stdout: () => undefined, stderr: () => undefined });
    call.end();
    return (await call.exited).exitCode;
  };
  const stage = (where: { dir: string; path: string }, bytes: Buffer, signal: AbortSignal | undefined) => stageFile(target, where, bytes, signal, runRaw);

  /** Whether the command of `nonce` started in the machine (it logged its nonce); a pure read, retried. */
  const started = (nonce: string): Promise<boolean> => withRetry(async () => (await runRaw(`grep -qxF ${nonce} ${START_LOG} 2>/dev/null`)) === 0, { idempotent: true, attempts: EXEC_ATTEMPTS });

  const processes: StreamedProcessApi = {
    async start(spec, output) {
      // The command logs its nonce first thing (a builtin append, no fork): after a failed call, a
      // read of the log tells whether it started, so a command is never run twice.
      const nonce = randomBytes(12).toString("hex");
      let command = `{ printf '%s\\n' ${nonce} >>${START_LOG}; } 2>/dev/null\n${commandOf(spec.argv)}`;
      if (Buffer.byteLength(command) > BOXD_MAX_COMMAND_BYTES) {
        // Too long for one argument: the command goes as a file, a bootstrap reads and removes it.
        const dir = `/tmp/.paperclip-cmd.${randomBytes(12).toString("hex")}`;
        await stage({ dir, path: `${dir}/cmd` }, Buffer.from(command, "utf8"), spec.signal);
        command = `__pc_cmd=$(cat ${shellQuote(`${dir}/cmd`)}) && rm -rf -- ${shellQuote(dir)} && exec /bin/sh -c "$__pc_cmd"`;
      }
      let answered = false;
      const seen = {
        stdout: (chunk: Buffer) => ((answered = true), output.stdout(chunk)),
        stderr: (chunk: Buffer) => ((answered = true), output.stderr(chunk)),
      };
      let call = await target.api.exec(target.id, command, seen);
      if (!spec.stdin) call.end();
      let cut = false;
      const onAbort = () => {
        cut = true;
        call.cancel();
      };
      if (spec.signal.aborted) onAbort();
      else spec.signal.addEventListener("abort", onAbort, { once: true });
      // A call refused or broken before any output is tried again when nothing of it can be lost:
      // no streamed stdin was consumed, and the command had not started (its nonce is not logged).
      const exited = (async () => {
        for (let attempt = 1; ; attempt += 1) {
          try {
            const r = await call.exited;
            return { exitCode: r.exitCode, signal: r.cancelled ? "SIGKILL" : null };
          } catch (error) {
            const replayable = !spec.stdin && !answered && !cut && attempt < EXEC_ATTEMPTS;
            if (!replayable || !(isProviderApiError(error) && error.retryable)) throw error;
            await pause(attempt, error);
            if (cut || (await started(nonce))) throw error;
            call = await target.api.exec(target.id, command, seen);
            call.end();
          }
        }
      })();
      return {
        // boxd reports no pid; the group is reached by the wrapper's pid file or the call's cancel.
        pid: 0,
        exited,
        writeStdin: (chunk) => call.write(chunk),
        closeStdin: async () => call.end(),
        kill: async () => call.cancel(),
      };
    },
  };

  const streamed = createStreamedProcessRunner({ api: processes, signals: "pid", inlineStdinMaxBytes: BOXD_INLINE_STDIN_BYTES });
  return withRemoteGroupKill(withInlineEnv(withStagedStdin(streamed, { thresholdBytes: BOXD_INLINE_STDIN_BYTES, stage })));
}

/**
 * Login terminals (`supportsLoginPty`): an `Exec` with `tty` (`ExecChunk.tty`, field 3) runs the
 * command on a pseudo-terminal, stdin chunks are what is typed, the output one stream, the exit
 * code the last chunk. boxd's documented `ExecChunk` has no window size, so the kit's
 * `launchedPty` sets the size on the terminal itself and resizes it (TIOCSWINSZ) from a second
 * call, as it signals the session's group; the program is staged in a 0600 file through `control`.
 */
export function boxdTerminals(target: BoxdTarget, control: ScriptRunner): PtyTransport {
  return launchedPty({
    name: `boxd machine ${target.id}`,
    control,
    channelExitStatus: true,
    openChannel: async (command, _size, _term, onData) => {
      const call = await target.api.exec(target.id, command, { stdout: onData, stderr: onData }, { tty: true });
      return {
        ended: call.exited.then(
          (exit) => ({ exitCode: exit.cancelled ? null : exit.exitCode }),
          (error: Error) => ({ exitCode: null, detail: error.message }),
        ),
        write: (bytes) => call.write(bytes).catch(() => undefined),
        close: () => call.cancel(),
      };
    },
  });
}
