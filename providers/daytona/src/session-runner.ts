import { randomBytes } from "node:crypto";
import {
  envPrologue,
  ExitMarkerScanner,
  exitMarkerLine,
  isProviderApiError,
  memoAsync,
  pollUntil,
  runWithStagedStdin,
  scriptSink,
  shellQuote,
  stageStdin,
  withRemoteGroupKill,
  type FileTransport,
  type ScriptIo,
  type ScriptRunner,
} from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import { NOT_RUN_STATUSES } from "./exec.js";
import type { DaytonaHandle } from "./sandboxes.js";

/** What the runner needs of an exec API with sessions and a log stream (Daytona's `process/session`). */
export interface SessionApi {
  /** The session commands run in (made once, again after `forgetSession`). */
  session(): Promise<string>;
  forgetSession(): void;
  /** Starts `command` in the background; its id. */
  start(sessionId: string, command: string): Promise<string>;
  /** Live stdout and stderr until the command ends; resolves when the stream closes (also when it was cut). */
  follow(sessionId: string, commandId: string, onStdout: (text: string) => void, onStderr: (text: string) => void): Promise<void>;
  /** The exit code once the command has ended. */
  exitCode(sessionId: string, commandId: string): Promise<number | undefined>;
  /** All of the command's output so far. */
  logs(sessionId: string, commandId: string): Promise<{ stdout: string; stderr: string }>;
}

/**
 * Commands through a session with live, separate stdout and stderr (2 calls: start, log stream).
 * The wrapper prints the script's exit status as a marker line on stderr, so the stream alone
 * gives the result; a stream that ends without it (dropped) is completed from the command's
 * status and full logs. Output is text (the SDK decodes it as UTF-8): not binary-safe.
 */
export function createSessionRunner(api: SessionApi, files: FileTransport): ScriptRunner {
  const runner: ScriptRunner = {
    capabilities: Object.freeze({ stdin: "buffered", stdinEof: true, binarySafe: false, liveOutput: true, separateStderr: true, signals: "none", remoteTimeout: false }),
    async run(script, io) {
      const nonce = randomBytes(12).toString("hex");
      const command = await wrap(script, io, nonce, files);
      let sessionId = await api.session();
      let commandId: string;
      try {
        commandId = await api.start(sessionId, command);
      } catch (error) {
        if (!isProviderApiError(error) || error.status !== 404) throw error;
        api.forgetSession(); // the daemon restarted (the sandbox was stopped): sessions are gone
        sessionId = await api.session();
        commandId = await api.start(sessionId, command);
      }
      // Daytona's log callbacks cannot pause: writes go on without waiting (a Writable buffers them).
      const stdout = scriptSink(io.stdout);
      const stderr = scriptSink(io.stderr);
      const scanner = new ExitMarkerScanner(`PCEXIT${nonce}`);
      let status: number | undefined;
      scanner.onExit((code) => (status = code));
      let outBytes = 0;
      let errBytes = 0;
      const onStdout = (text: string) => {
        const bytes = Buffer.from(text, "utf8");
        outBytes += bytes.length;
        void stdout.write(bytes);
      };
      const onStderr = (text: string) => {
        const bytes = Buffer.from(text, "utf8");
        errBytes += bytes.length;
        void stderr.write(scanner.filter.push(bytes));
      };
      await api.follow(sessionId, commandId, onStdout, onStderr).catch(() => undefined);
      if (status === undefined) {
        // The stream ended before the exit line (cut, or never opened): wait for the end, read the rest.
        const code = await waitForExit(api, sessionId, commandId);
        const logs = await api.logs(sessionId, commandId);
        void stdout.write(Buffer.from(logs.stdout, "utf8").subarray(outBytes));
        void stderr.write(scanner.filter.push(Buffer.from(logs.stderr, "utf8").subarray(errBytes)));
        status ??= code;
      }
      void stderr.write(scanner.filter.flush());
      await Promise.all([stdout.end(), stderr.end()]);
      return { exitCode: status ?? null, signal: null, reason: "exit" };
    },
  };
  return withRemoteGroupKill(runner);
}

/** The session command: env, the script with its stdin (the kit's staging: inline or an uploaded file), then the exit marker. */
async function wrap(script: string, io: ScriptIo, nonce: string, files: FileTransport): Promise<string> {
  const stdin = await stageStdin(io.stdin, { files });
  return [envPrologue(io.env) + runWithStagedStdin(`( exec /bin/sh -c ${shellQuote(script)} )`, stdin, nonce).join("\n"), exitMarkerLine(`PCEXIT${nonce}`, "$__pc_rc"), `exit "$__pc_rc"`].join("\n");
}

/** The command's exit code once Daytona reports one (100 ms doubling to 1 s between reads; the command's own end ends the wait). */
async function waitForExit(api: SessionApi, sessionId: string, commandId: string): Promise<number | undefined> {
  return pollUntil(
    () => api.exitCode(sessionId, commandId),
    (code) => code !== undefined,
    { what: `daytona session command ${commandId} to end`, intervalMs: 100, maxIntervalMs: 1_000 },
  );
}

/** Daytona's session API through the SDK: one session per sandbox boot, made on first use. */
export function daytonaSessionApi(client: DaytonaClient, handle: DaytonaHandle): SessionApi {
  const process = () => handle.sandbox.process;
  handle.session ??= memoAsync(async () => {
    const id = `paperclip-${randomBytes(8).toString("hex")}`;
    await client.call("createSession", () => process().createSession(id), { idempotent: false, notProcessed: NOT_RUN_STATUSES });
    return id;
  });
  const session = handle.session;
  return {
    session,
    forgetSession: () => session.forget(),
    start: async (sessionId, command) =>
      (await client.call("executeSessionCommand", () => process().executeSessionCommand(sessionId, { command, runAsync: true }), { idempotent: false, notProcessed: NOT_RUN_STATUSES })).cmdId,
    follow: (sessionId, commandId, onStdout, onStderr) =>
      client.call("followSessionCommandLogs", () => process().getSessionCommandLogs(sessionId, commandId, onStdout, onStderr), { idempotent: false, attempts: 1 }),
    exitCode: async (sessionId, commandId) => (await client.call("getSessionCommand", () => process().getSessionCommand(sessionId, commandId), { idempotent: true, safeMethod: true })).exitCode,
    logs: async (sessionId, commandId) => {
      const logs = await client.call("getSessionCommandLogs", () => process().getSessionCommandLogs(sessionId, commandId), { idempotent: true, safeMethod: true });
      return { stdout: logs?.stdout ?? "", stderr: logs?.stderr ?? "" };
    },
  };
}
