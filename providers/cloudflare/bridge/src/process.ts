import { parseSSEStream, type ExecutionSession, type Sandbox } from "@cloudflare/sandbox";
import { Buffer } from "node:buffer";
import type { Env } from "./env.js";
import type { ExecSpec } from "./exec.js";
import { BridgeError } from "./http.js";
import { endIfGone, leaseLive } from "./live-lease.js";
import { CONTROL_SESSION_ID, controlExec, destroyQuietly, sandboxFor } from "./sandboxes.js";
import type { SseChannel } from "./sse.js";
import { assertEnvKeys, buildProcessScript, plainShell, processDir, signalProcessScript, type ProcessSignal } from "./shell.js";

/**
 * Streamed processes (the `streams` extension): binary-safe live output, streamed stdin and a kill
 * that reaches the whole process group, over the 0.7.x container, whose streamed exec relays text
 * lines and has no stdin for a running command. The command's output is base64 lines made in the
 * sandbox (see `buildProcessScript`), relayed as `event: stdout|stderr` `{base64}`; stdin parts are
 * files the sandbox's feeder copies into the command's stdin pipe.
 */

/** A process id as this bridge makes them (a UUID): also a path component, so checked strictly. */
const PROCESS_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FRAME = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** After SIGTERM at the deadline (or when the client is gone), SIGKILL this much later. */
const KILL_GRACE_MS = 1_000;
/** A killed process's stream that has still not ended this much later: the session (or sandbox) goes. */
const STREAM_END_BACKSTOP_MS = 10_000;
/** One stdin part at most (the client sends up to 1 MiB). */
export const MAX_STDIN_PART_BYTES = 8 * 1024 * 1024;

export function processIdOf(raw: string): string {
  if (!PROCESS_ID.test(raw)) throw new BridgeError(400, "invalid_request", "processId must be a process id this bridge returned.");
  return raw;
}

export function seqOf(raw: unknown): number {
  const n = typeof raw === "number" ? raw : typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw new BridgeError(400, "invalid_request", "seq must be a whole number from 0.");
  return n;
}

/** Drops stdin part `seq` (one container write; the feeder takes it once all its bytes are there). */
export async function writeStdinPart(sandbox: Sandbox, processId: string, seq: number, bytes: Uint8Array): Promise<void> {
  await sandbox.writeFile(`${processDir(processId)}/in.${seq}.${bytes.byteLength}`, Buffer.from(bytes).toString("base64"), { encoding: "base64", sessionId: CONTROL_SESSION_ID });
}

/** Marks stdin's end after `seq` parts. */
export async function closeStdin(sandbox: Sandbox, processId: string, seq: number): Promise<void> {
  await sandbox.writeFile(`${processDir(processId)}/in.${seq}.eof`, "", { encoding: "utf8", sessionId: CONTROL_SESSION_ID });
}

export async function signalProcess(sandbox: Sandbox, processId: string, signal: ProcessSignal): Promise<void> {
  await controlExec(sandbox, signalProcessScript(processDir(processId), signal), `Signal process ${processId}`, 30_000);
}

interface ContainerEvent {
  type: string;
  data?: string;
  exitCode?: number;
  error?: string;
}

/** Splits a stream's text into lines (the container relays lines, but a chunk boundary is not promised). */
class Lines {
  private rest = "";
  push(text: string, each: (line: string) => Promise<void>): Promise<void> {
    const parts = (this.rest + text).split("\n");
    this.rest = parts.pop()!;
    return parts.reduce((done, line) => done.then(() => each(line)), Promise.resolve());
  }
  flush(each: (line: string) => Promise<void>): Promise<void> {
    const last = this.rest;
    this.rest = "";
    return last === "" ? Promise.resolve() : each(last);
  }
}

export class ProcessRun {
  readonly processId = crypto.randomUUID();
  private readonly dir = processDir(this.processId);
  private readonly sandbox: Sandbox;
  private timedOut = false;
  /** The run has reported its end: a client leaving now is no reason to signal anything. */
  private finished = false;
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly env: Env,
    private readonly spec: ExecSpec,
  ) {
    assertEnvKeys(spec.env);
    this.sandbox = sandboxFor(env, spec.providerLeaseId);
  }

  /** Runs the process to its end, relaying it on `sse`: `start`, frames, then `complete` (or `error`). */
  async run(sse: SseChannel): Promise<void> {
    let exitCode: number | null = null;
    let completed = false;
    let exitSeen = false;
    let started = false;
    const stdoutLines = new Lines();
    const stderrLines = new Lines();
    const text = (line: string) => Buffer.from(`${line}\n`, "utf8").toString("base64");
    const onStdout = async (line: string) => {
      if (line === "") return;
      const pid = /^:pid (\d+)$/.exec(line);
      if (pid) {
        started = true;
        return sse.send("start", { processId: this.processId, pid: Number(pid[1]) });
      }
      if (/^:exit \d+$/.test(line)) {
        exitSeen = true;
        return;
      }
      // Only frames reach the script's stdout; anything else is passed on as text, never dropped.
      await sse.send("stdout", { base64: FRAME.test(line) ? line : text(line) });
    };
    // The script's own complaints (a failed mkfifo) are text on its stderr; the command's are frames.
    const onStderr = async (line: string) => (line === "" ? undefined : sse.send("stderr", { base64: FRAME.test(line) ? line : text(line) }));

    sse.onBroken(() => this.abandon());
    let deadline: ReturnType<typeof setTimeout> | undefined;
    let backstop: ReturnType<typeof setTimeout> | undefined;
    let reader: AsyncIterator<ContainerEvent> | undefined;
    try {
      if (this.spec.stdin) await this.stageStdin(this.spec.stdin);
      const script = plainShell(
        buildProcessScript({
          command: this.spec.command,
          args: this.spec.args,
          ...(this.spec.cwd ? { cwd: this.spec.cwd } : {}),
          env: this.spec.env,
          dir: this.dir,
          stdinStream: this.spec.stdinStream || this.spec.stdin !== null,
        }),
      );
      const target = await this.target();
      const stream = await target.execStream(script, { cwd: "/" });
      deadline = setTimeout(() => {
        this.timedOut = true;
        void this.stop("deadline");
        // A stream that does not end after the kill (a wedged session): take the session away.
        backstop = setTimeout(() => void this.dropSession().then(() => reader?.return?.()), STREAM_END_BACKSTOP_MS);
      }, this.spec.timeoutMs);
      reader = parseSSEStream<ContainerEvent>(stream)[Symbol.asyncIterator]();
      for (;;) {
        const next = await reader.next();
        if (next.done) break;
        const event = next.value;
        if (event.type === "stdout" && typeof event.data === "string") await stdoutLines.push(event.data, onStdout);
        else if (event.type === "stderr" && typeof event.data === "string") await stderrLines.push(event.data, onStderr);
        else if (event.type === "complete") {
          completed = true;
          exitCode = typeof event.exitCode === "number" ? event.exitCode : null;
        } else if (event.type === "error") {
          if (this.timedOut) break;
          throw new Error(event.error ?? event.data ?? "the container's command stream failed");
        }
      }
      await stdoutLines.flush(onStdout);
      await stderrLines.flush(onStderr);
      if (!this.timedOut && !completed) throw new Error("the container's command stream ended without completion");
      // The script prints `:exit` last: without it the tail of the output was lost on the way.
      if (!this.timedOut && !exitSeen && started) throw new Error("the container's command stream lost the end of the output");
      this.finished = true;
      await sse.send("complete", {
        exitCode: this.timedOut ? null : exitCode,
        signal: null,
        timedOut: this.timedOut,
        stdout: "",
        stderr: this.timedOut ? `Command timed out after ${this.spec.timeoutMs}ms (the bridge's deadline).\n` : "",
      });
    } catch (error) {
      this.finished = true;
      await sse.send("error", { error: error instanceof Error ? error.message : String(error) });
    } finally {
      this.finished = true;
      clearTimeout(deadline);
      clearTimeout(backstop);
      // The script removes its directory at its end; a killed or cut-off one may not have.
      if (!exitSeen && (await leaseLive(this.env, this.spec.providerLeaseId).catch(() => false))) {
        await controlExec(this.sandbox, `rm -rf -- '${this.dir}'`, "Remove a process directory").catch(() => undefined);
      }
      // A destroy that came while this ran may have been followed by a call that started a fresh container.
      await endIfGone(this.env, this.spec.providerLeaseId);
    }
  }

  private async target(): Promise<Pick<ExecutionSession, "execStream">> {
    if (this.spec.sessionStrategy === "default") return this.sandbox;
    return this.sandbox.getSession(this.spec.sessionId);
  }

  /** Stdin given in the request itself: part 0 and the end mark, before the process starts. */
  private async stageStdin(stdin: NonNullable<ExecSpec["stdin"]>): Promise<void> {
    const bytes = "text" in stdin ? new TextEncoder().encode(stdin.text) : new Uint8Array(Buffer.from(stdin.base64, "base64"));
    await controlExec(this.sandbox, `mkdir -p '${this.dir}'`, "Create a process directory");
    await writeStdinPart(this.sandbox, this.processId, 0, bytes);
    await closeStdin(this.sandbox, this.processId, 1);
  }

  /** The client went away: nobody reads the output, so the process is ended. */
  abandon(): void {
    if (!this.finished) void this.stop("abandoned");
  }

  /** TERM to the group, KILL a moment later; once per run (the deadline or a client that went away). */
  private stop(_why: "deadline" | "abandoned"): Promise<void> {
    // On a lease destroyed meanwhile the process can only be in a container a late call started:
    // that container goes (which ends the stream).
    const signal = async (name: ProcessSignal) => {
      if (await leaseLive(this.env, this.spec.providerLeaseId).catch(() => false)) await signalProcess(this.sandbox, this.processId, name).catch(() => undefined);
      await endIfGone(this.env, this.spec.providerLeaseId);
    };
    this.stopping ??= (async () => {
      await signal("TERM");
      await new Promise((resolve) => setTimeout(resolve, KILL_GRACE_MS));
      await signal("KILL");
    })();
    return this.stopping;
  }

  /** The last resort of a deadline: the named session deleted, or under the default strategy the sandbox destroyed. */
  private async dropSession(): Promise<void> {
    if (this.spec.sessionStrategy === "default") await destroyQuietly(this.sandbox);
    else if (this.spec.sessionId !== CONTROL_SESSION_ID) await this.sandbox.deleteSession(this.spec.sessionId).catch(() => undefined);
  }
}
