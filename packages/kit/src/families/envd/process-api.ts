import { ProviderApiError } from "../../vendor/api-error.js";
import { withRetry } from "../../vendor/retry.js";
import type { StreamedProcess, StreamedProcessApi, StreamedProcessExit, StreamedProcessOutput, StreamedProcessSpec } from "../../transports/streamed-process-runner.js";
import { envdApiError } from "./errors.js";
import { ENVD_SIGNAL, processRpcOf, type EnvdProcessEvent, type EnvdSandboxLike } from "./sdk-shapes.js";

export interface EnvdProcessApiOptions {
  vendor: string;
  /** How long the start event may take (the SDK's request timeout). */
  requestTimeoutMs: number;
  /** Keepalive events while a process is silent, so idle proxies keep the stream (seconds; SDK default 50). */
  keepaliveSeconds?: number;
}

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
 * end event), stdin goes through SendInput/CloseStdin, signals through SendSignal (a pid). A start
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
    start: (spec, output) =>
      withRetry(() => startOnce(spec, output), { idempotent: false, attempts: 3, totalMs: Math.max(10_000, options.requestTimeoutMs), signal: spec.signal }),
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
      throw new ProviderApiError({ vendor, operation: "process.Start", status: 200, code: "protocol", detail: "the process stream did not begin with a start event", retryable: false, gone: false, mayHaveTakenEffect: true });
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
        if (!end) throw new ProviderApiError({ vendor, operation: "process.Start", status: 200, code: "protocol", detail: `the stream of process ${pid} ended without an end event`, retryable: false, gone: false, mayHaveTakenEffect: true });
        return exitOf(end);
      } catch (error) {
        const failure = envdApiError(vendor, "process.Start", error);
        if (failure.code === "deadline_exceeded" && spec.timeoutMs !== undefined) return { exitCode: null, signal: "SIGKILL", timedOut: true };
        throw failure;
      } finally {
        spec.signal.removeEventListener("abort", onAbort);
      }
    })();

    return {
      pid,
      exited,
      writeStdin: (chunk) => unary("process.SendInput", () => rpc.sendInput({ process: selector(pid), input: { input: { case: "stdin", value: chunk } } }, { signal: callTimeout() })),
      closeStdin: () => unary("process.CloseStdin", () => rpc.closeStdin({ process: selector(pid) }, { signal: callTimeout() })),
      kill: (signal) => unary("process.SendSignal", () => rpc.sendSignal({ process: selector(pid), signal: ENVD_SIGNAL[signal] }, { signal: callTimeout() })),
    };
  }
}

function exitOf(end: { exitCode: number; exited: boolean; status: string }): StreamedProcessExit {
  if (end.exited) return { exitCode: end.exitCode, signal: null };
  const word = /^signal: (.+)$/.exec(end.status ?? "")?.[1];
  if (word !== undefined) return { exitCode: null, signal: SIGNAL_BY_WORD[word] ?? word.toUpperCase() };
  return { exitCode: end.exitCode < 0 ? null : end.exitCode, signal: end.exitCode < 0 ? "SIGKILL" : null };
}
