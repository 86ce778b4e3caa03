import type { ExecutionSession, Sandbox } from "@cloudflare/sandbox";
import type { Env } from "./env.js";
import { BridgeError, int, str } from "./http.js";
import { CONTROL_SESSION_ID, DEFAULT_SESSION_ID, DEFAULT_TIMEOUT_MS, destroyQuietly, sandboxFor, type SessionStrategy } from "./sandboxes.js";
import { assertEnvKeys, buildCommandScript, killGroupScript, loginShell } from "./shell.js";

/** Host commands that carry machine-read payloads: never streamed (a streamed exec can lose its last chunk). */
const EXEC_CHANNEL_ENV = "PAPERCLIP_SANDBOX_EXEC_CHANNEL";

export interface ExecResult {
  exitCode: number | null;
  signal: null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

export interface ExecSpec {
  providerLeaseId: string;
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  /** UTF-8 text (`stdin`, upstream's field) or bytes (`stdinBase64`, this bridge's). */
  stdin: { text: string } | { base64: string } | null;
  timeoutMs: number;
  stream: boolean;
  /** A streamed process (`outputEncoding: "base64"`, the `streams` extension): binary frames, a process id. */
  processMode: boolean;
  /** Stdin arrives in parts (`PUT /exec/{processId}/stdin`); process mode only. */
  stdinStream: boolean;
  sessionStrategy: SessionStrategy;
  sessionId: string;
}

export function parseExecBody(body: Record<string, unknown>): ExecSpec {
  const providerLeaseId = str(body.providerLeaseId);
  const command = typeof body.command === "string" && body.command !== "" ? body.command : undefined;
  if (!providerLeaseId || !command) throw new BridgeError(400, "invalid_request", "providerLeaseId and command are required.");
  const env: Record<string, string> = {};
  if (body.env && typeof body.env === "object" && !Array.isArray(body.env)) {
    for (const [key, value] of Object.entries(body.env as Record<string, unknown>)) if (typeof value === "string") env[key] = value;
  }
  let stream = body.streamOutput === true;
  const processMode = stream && body.outputEncoding === "base64";
  // The host's bridge channel is answered on the non-streaming path, whatever the client asked (a
  // streamed process proves its output complete by its end frame, so it is left streamed).
  if (env[EXEC_CHANNEL_ENV] === "bridge" && !processMode) stream = false;
  delete env[EXEC_CHANNEL_ENV];
  const stdin = typeof body.stdinBase64 === "string" && body.stdinBase64 !== "" ? { base64: body.stdinBase64 } : typeof body.stdin === "string" && body.stdin !== "" ? { text: body.stdin } : null;
  return {
    providerLeaseId,
    command,
    args: Array.isArray(body.args) ? body.args.filter((a): a is string => typeof a === "string") : [],
    ...(str(body.cwd) ? { cwd: str(body.cwd)! } : {}),
    env,
    stdin,
    timeoutMs: int(body.timeoutMs, DEFAULT_TIMEOUT_MS),
    stream,
    processMode,
    stdinStream: processMode && body.stdinStream === true,
    sessionStrategy: body.sessionStrategy === "default" ? "default" : "named",
    sessionId: str(body.sessionId) ?? DEFAULT_SESSION_ID,
  };
}

type Target = Pick<ExecutionSession, "exec">;

async function targetFor(sandbox: Sandbox, spec: ExecSpec): Promise<Target> {
  if (spec.sessionStrategy === "default") return sandbox;
  try {
    return await sandbox.getSession(spec.sessionId);
  } catch (error) {
    if (!/not found|does not exist|no such session/i.test(error instanceof Error ? error.message : String(error))) throw error;
    return sandbox.createSession({ id: spec.sessionId, commandTimeoutMs: spec.timeoutMs });
  }
}

const isTimeout = (error: unknown): boolean => {
  const e = error as { name?: unknown; message?: unknown };
  return (typeof e?.name === "string" && /timeout/i.test(e.name)) || (typeof e?.message === "string" && /timed out|timeout/i.test(e.message));
};

/** One command in the lease's sandbox; `onOutput` set means streamed. */
export class CommandRun {
  private readonly sandbox: Sandbox;
  private readonly id = crypto.randomUUID();
  private readonly groupFile: string;
  private stdinFile: string | undefined;

  constructor(
    env: Env,
    private readonly spec: ExecSpec,
  ) {
    assertEnvKeys(spec.env);
    this.sandbox = sandboxFor(env, spec.providerLeaseId);
    this.groupFile = `/tmp/.paperclip-bridge-group-${this.id}`;
  }

  /** Runs it to the end; a timeout is a result (`timedOut: true`), after the per-strategy cleanup. */
  async run(onOutput?: (stream: "stdout" | "stderr", data: string) => void): Promise<ExecResult> {
    try {
      if (this.spec.stdin) {
        this.stdinFile = `/tmp/.paperclip-bridge-stdin-${this.id}`;
        const content = "text" in this.spec.stdin ? this.spec.stdin.text : this.spec.stdin.base64;
        await this.sandbox.writeFile(this.stdinFile, content, { encoding: "text" in this.spec.stdin ? "utf8" : "base64" });
      }
      const script = loginShell(buildCommandScript({ ...this.spec, ...(this.stdinFile ? { stdinFile: this.stdinFile } : {}), groupFile: this.groupFile }));
      const target = await targetFor(this.sandbox, this.spec);
      return onOutput ? await this.streamed(target, script, onOutput) : await this.buffered(target, script);
    } finally {
      if (this.stdinFile) await this.sandbox.deleteFile(this.stdinFile).catch(() => undefined);
    }
  }

  private async buffered(target: Target, script: string): Promise<ExecResult> {
    try {
      const result = await target.exec(script, { cwd: "/", timeout: this.spec.timeoutMs });
      return mapResult(result);
    } catch (error) {
      if (!isTimeout(error)) throw error;
      // The container stops waiting but the command keeps running (and keeps its shell busy).
      await this.cleanupAfterTimeout();
      const stdout = (error as { stdout?: unknown }).stdout;
      return { exitCode: null, signal: null, timedOut: true, stdout: typeof stdout === "string" ? stdout : "", stderr: `${(error as Error).message}\n` };
    }
  }

  /** The container ignores the timeout of a streamed exec: the bridge keeps its own deadline. */
  private async streamed(target: Target, script: string, onOutput: (stream: "stdout" | "stderr", data: string) => void): Promise<ExecResult> {
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      void this.cleanupAfterTimeout();
    }, this.spec.timeoutMs);
    try {
      const result = await target.exec(script, { cwd: "/", timeout: this.spec.timeoutMs, stream: true, onOutput: (stream, data) => void (timedOut ? undefined : onOutput(stream, data)) });
      if (!timedOut) return mapResult(result);
      await this.cleanupAfterTimeout();
      return timeoutResult(this.spec.timeoutMs, result.stdout);
    } catch (error) {
      if (timedOut || isTimeout(error)) {
        await this.cleanupAfterTimeout();
        return timeoutResult(this.spec.timeoutMs, "");
      }
      throw error;
    } finally {
      clearTimeout(deadline);
    }
  }

  private cleanup: Promise<void> | undefined;

  /**
   * Nothing wedged survives a timeout: the command's process group is ended from the control
   * session, then the named session is deleted (its shell may still be busy), or, for the default
   * strategy, the whole sandbox is destroyed.
   */
  cleanupAfterTimeout(): Promise<void> {
    this.cleanup ??= (async () => {
      if (this.spec.sessionStrategy === "default") {
        await destroyQuietly(this.sandbox);
        return;
      }
      try {
        const control = await this.sandbox.getSession(CONTROL_SESSION_ID);
        await control.exec(killGroupScript(this.groupFile), { cwd: "/", timeout: 30_000 });
      } catch {
        // best effort: the session delete below still ends the shell
      }
      if (this.spec.sessionId !== CONTROL_SESSION_ID) await this.sandbox.deleteSession(this.spec.sessionId).catch(() => undefined);
    })();
    return this.cleanup;
  }
}

function mapResult(result: { exitCode?: unknown; success?: unknown; stdout?: unknown; stderr?: unknown }): ExecResult {
  const exitCode = typeof result.exitCode === "number" || result.exitCode === null ? (result.exitCode as number | null) : result.success === false ? 1 : 0;
  return { exitCode, signal: null, timedOut: false, stdout: typeof result.stdout === "string" ? result.stdout : "", stderr: typeof result.stderr === "string" ? result.stderr : "" };
}

function timeoutResult(timeoutMs: number, stdout: string): ExecResult {
  return { exitCode: null, signal: null, timedOut: true, stdout, stderr: `Command timed out after ${timeoutMs}ms (the bridge's deadline).\n` };
}
