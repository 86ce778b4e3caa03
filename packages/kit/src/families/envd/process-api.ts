import { ProviderApiError } from "../../vendor/api-error.js";
import { withRetry } from "../../vendor/retry.js";
import type { StreamedProcess, StreamedProcessApi, StreamedProcessExit, StreamedProcessOutput, StreamedProcessSpec } from "../../transports/streamed-process-runner.js";
import { envdApiError } from "./errors.js";
import { ENVD_SIGNAL, processRpcOf, type EnvdProcessEvent, type EnvdSandboxLike } from "./sdk-shapes.js";
import { openEnvdStreamInput, type EnvdRpcEndpoint, type EnvdStreamInput } from "./stream-input.js";

export interface EnvdProcessApiOptions {
  vendor: string;
  /** How long the start event may take (the SDK's request timeout). */
  requestTimeoutMs: number;
  /** Keepalive events while a process is silent, so idle proxies keep the stream (seconds; SDK default 50). */
  keepaliveSeconds?: number;
  /**
   * Where the SDK sends envd's Connect calls. Given, a process's stdin travels in one
   * `StreamInput` client stream (one request for all of it) instead of a `SendInput` call per
   * write; absent (or refused by this envd), through `SendInput`.
   */
  rpcEndpoint?: EnvdRpcEndpoint;
}

/** Bytes sent on a StreamInput kept to resend through SendInput if envd turns the stream down. */
const STREAM_INPUT_RESEND_MAX = 1024 * 1024;

/** envd's answers when a process's stdin is gone (it exited, or closed it): feeding ends, as EPIPE would. */
const STDIN_GONE: ReadonlySet<string> = new Set(["not_found", "failed_precondition", "internal"]);

/** Go's `ProcessState` wording in envd's end event, back to signal names. */
const SIGNAL_BY_WORD: Record<string, string> = {
  killed: "SIGKILL",
  terminated: "SIGTERM",
  interrupt: "SIGINT",
  hangup: "SIGHUP",
  quit: "SIGQUIT",
  "segmentation fault": "SIGSEGV",
  aborted: "SIGABRT",
  "broken pipe": "SIGPIPE",
};

/**
 * envd's `process.Process` as the kit's streamed process API, over the SDK's own generated client
 * (its transport, access token and sandbox headers): Start is one server stream (start event, data,
 * end event), stdin goes through one StreamInput client stream (with `rpcEndpoint`; SendInput per
 * write otherwise, or when envd refuses the stream) then CloseStdin, signals through SendSignal (a
 * pid). A start
 * that was refused before it ran (quota, busy) is tried again; one that found the sandbox not
 * running fails with code `sandbox_not_running`, so the lifecycle layer can resume it and retry.
 */
export function envdProcessApi(sandbox: EnvdSandboxLike, options: EnvdProcessApiOptions): StreamedProcessApi {
  const rpc = processRpcOf(sandbox);
  const vendor = options.vendor;
  const selector = (pid: number) => ({ selector: { case: "pid" as const, value: pid } });
  const unary = async (operation: string, call: () => Promise<unknown>) => {
    try {
      await call();
    } catch (error) {
      throw envdApiError(vendor, operation, error);
    }
  };
  const callTimeout = () => AbortSignal.timeout(options.requestTimeoutMs);

  return {
    start: (spec, output) => withRetry(() => startOnce(spec, output), { idempotent: false, attempts: 3, totalMs: Math.max(10_000, options.requestTimeoutMs), signal: spec.signal }),
  };

  async function startOnce(spec: StreamedProcessSpec, output: StreamedProcessOutput): Promise<StreamedProcess> {
    const connection = new AbortController();
    const onAbort = () => connection.abort(spec.signal.reason);
    if (spec.signal.aborted) onAbort();
    else spec.signal.addEventListener("abort", onAbort, { once: true });
    const startTimer = setTimeout(() => connection.abort(new Error(`no start event within ${options.requestTimeoutMs} ms`)), options.requestTimeoutMs);
    const [cmd, ...args] = spec.argv;
    const events = rpc.start(
      { process: { cmd: cmd!, args, envs: spec.env ?? {} }, stdin: spec.stdin },
      {
        signal: connection.signal,
        headers: { "Keepalive-Ping-Interval": String(options.keepaliveSeconds ?? 50) },
        ...(spec.timeoutMs !== undefined ? { timeoutMs: spec.timeoutMs } : {}),
      },
    );
    const iterator = events[Symbol.asyncIterator]();
    let first: IteratorResult<EnvdProcessEvent>;
    try {
      first = await iterator.next();
    } catch (error) {
      spec.signal.removeEventListener("abort", onAbort);
      throw envdApiError(vendor, "process.Start", error, { beforeStart: true });
    } finally {
      clearTimeout(startTimer);
    }
    const event = first.done ? undefined : first.value.event?.event;
    if (event?.case !== "start") {
      connection.abort();
      spec.signal.removeEventListener("abort", onAbort);
      throw new ProviderApiError({
        vendor,
        operation: "process.Start",
        status: 200,
        code: "protocol",
        detail: "the process stream did not begin with a start event",
        retryable: false,
        gone: false,
        mayHaveTakenEffect: true,
      });
    }
    const pid = event.value.pid;

    const exited = (async (): Promise<StreamedProcessExit> => {
      try {
        let end: { exitCode: number; exited: boolean; status: string } | undefined;
        for (;;) {
          const next = await iterator.next();
          if (next.done) break;
          const e = next.value.event?.event;
          if (e?.case === "data") {
            const out = e.value.output;
            if (out.case === "stdout" || out.case === "stderr") {
              const bytes = Buffer.from(out.value.buffer, out.value.byteOffset, out.value.byteLength);
              await (out.case === "stdout" ? output.stdout(bytes) : output.stderr(bytes));
            }
          } else if (e?.case === "end") {
            end = e.value;
          }
        }
        if (!end)
          throw new ProviderApiError({
            vendor,
            operation: "process.Start",
            status: 200,
            code: "protocol",
            detail: `the stream of process ${pid} ended without an end event`,
            retryable: false,
            gone: false,
            mayHaveTakenEffect: true,
          });
        return envdExitOf(end);
      } catch (error) {
        const failure = envdApiError(vendor, "process.Start", error);
        if (failure.code === "deadline_exceeded" && spec.timeoutMs !== undefined) return { exitCode: null, signal: "SIGKILL", timedOut: true };
        throw failure;
      } finally {
        spec.signal.removeEventListener("abort", onAbort);
      }
    })();

    const writeStdin = (chunk: Buffer) => unary("process.SendInput", () => rpc.sendInput({ process: selector(pid), input: { input: { case: "stdin", value: chunk } } }, { signal: callTimeout() }));
    const closeStdin = () => unary("process.CloseStdin", () => rpc.closeStdin({ process: selector(pid) }, { signal: callTimeout() }));
    const kill = (signal: "SIGTERM" | "SIGKILL") => unary("process.SendSignal", () => rpc.sendSignal({ process: selector(pid), signal: ENVD_SIGNAL[signal] }, { signal: callTimeout() }));
    const endpoint = options.rpcEndpoint;
    if (!endpoint || !spec.stdin) return { pid, exited, writeStdin, closeStdin, kill };
    return { pid, exited, kill, feedStdin: (source, ended) => streamStdin(endpoint, pid, source, ended, writeStdin, closeStdin) };
  }

  /**
   * A process's whole stdin over one StreamInput, then CloseStdin. envd refusing the stream
   * (`unimplemented`: it read none of it) sends it through SendInput instead, from the start;
   * stdin found gone ends feeding quietly (EPIPE); a stream that broke otherwise fails the feed
   * (what it carried is unknown: the runner fails the run, which a channel recovers from).
   */
  async function streamStdin(
    endpoint: EnvdRpcEndpoint,
    pid: number,
    source: AsyncIterable<Buffer>,
    ended: AbortSignal,
    writeStdin: (chunk: Buffer) => Promise<void>,
    closeStdin: () => Promise<void>,
  ): Promise<void> {
    let stream: EnvdStreamInput | undefined = openEnvdStreamInput(endpoint, pid, { vendor });
    let answer: ProviderApiError | undefined;
    let answered = false;
    void stream.settled.then((error) => {
      answer = error;
      answered = true;
    });
    let resend: Buffer[] | undefined = [];
    let resendBytes = 0;
    const onEnd = () => stream?.abort();
    ended.addEventListener("abort", onEnd, { once: true });

    /** envd answered before the stream was ended: true to carry on through SendInput. */
    const switchToSendInput = async (): Promise<boolean> => {
      const error = answer;
      stream = undefined;
      if (ended.aborted) return false;
      if (error?.code === "unimplemented" && resend) {
        try {
          for (const chunk of resend) await writeStdin(chunk);
        } catch {
          return false; // stdin gone: as EPIPE
        }
        resend = undefined;
        return true;
      }
      if (error === undefined || STDIN_GONE.has(error.code)) return false;
      throw error;
    };

    try {
      for await (const chunk of source) {
        if (ended.aborted) return;
        if (stream && answered && !(await switchToSendInput())) return;
        if (!stream) {
          try {
            await writeStdin(chunk);
          } catch {
            return; // stdin gone: as EPIPE
          }
          continue;
        }
        if (resend) {
          resend.push(chunk);
          resendBytes += chunk.length;
          if (resendBytes > STREAM_INPUT_RESEND_MAX) resend = undefined;
        }
        try {
          await stream.write(chunk);
        } catch {
          await stream.settled;
          if (!(await switchToSendInput())) return;
        }
      }
      if (ended.aborted) return;
      if (stream) {
        try {
          await stream.end();
        } catch {
          if (!(await switchToSendInput())) return;
        }
      }
      await closeStdin().catch(() => undefined);
    } finally {
      ended.removeEventListener("abort", onEnd);
      stream?.abort();
    }
  }
}

export function envdExitOf(end: { exitCode: number; exited: boolean; status: string }): StreamedProcessExit {
  if (end.exited) return { exitCode: end.exitCode, signal: null };
  const word = /^signal: (.+)$/.exec(end.status ?? "")?.[1];
  if (word !== undefined) return { exitCode: null, signal: SIGNAL_BY_WORD[word] ?? word.toUpperCase() };
  return { exitCode: end.exitCode < 0 ? null : end.exitCode, signal: end.exitCode < 0 ? "SIGKILL" : null };
}
