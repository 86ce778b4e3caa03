import { abortedExit, type ScriptRunner, type TransportCapabilities } from "../transport.js";
import { collectStdin, deliverAll, toBuffer } from "./collect.js";

/** One request/response exec call: everything in, everything out. */
export interface BufferedExecRequest {
  script: string;
  /** All of stdin, or undefined for none. */
  stdin: Buffer | undefined;
  env: Record<string, string> | undefined;
  /** Passed only when the transport declares `remoteTimeout`. */
  timeoutMs: number | undefined;
  signal: AbortSignal;
}

export interface BufferedExecResponse {
  exitCode: number | null;
  signal?: string | null;
  /** A string means the vendor returned text: declare `binarySafe: false` unless it is base64. */
  stdout: Buffer | string;
  stderr?: Buffer | string;
  timedOut?: boolean;
}

export interface BufferedRunnerOptions {
  exec(request: BufferedExecRequest): Promise<BufferedExecResponse>;
  /** What the vendor call can do; everything a buffered call cannot do is fixed here. */
  capabilities: Pick<TransportCapabilities, "binarySafe" | "separateStderr" | "remoteTimeout"> & Partial<Pick<TransportCapabilities, "signals" | "maxScriptBytes" | "maxStdinBytes">>;
}

/**
 * A runner over a request/response exec API (stdin sent with the request, output returned at the
 * end). An abort cancels the request; whether the remote command then ends is the vendor's
 * (`signals: "none"` unless it kills on disconnect — wrap with `withRemoteGroupKill` otherwise).
 */
export function createBufferedRunner(opts: BufferedRunnerOptions): ScriptRunner {
  const capabilities: TransportCapabilities = Object.freeze({
    stdin: "buffered",
    stdinEof: true,
    liveOutput: false,
    signals: "none",
    ...opts.capabilities,
  });
  return {
    capabilities,
    async run(script, io) {
      const stdin = await collectStdin(io.stdin, capabilities.maxStdinBytes);
      const signal = io.signal ?? new AbortController().signal;
      if (signal.aborted) return abortedExit();
      let response: BufferedExecResponse;
      try {
        response = await opts.exec({
          script,
          stdin,
          env: io.env,
          timeoutMs: capabilities.remoteTimeout ? io.timeoutMs : undefined,
          signal,
        });
      } catch (error) {
        if (signal.aborted) return abortedExit("SIGKILL");
        throw error;
      }
      await deliverAll(io.stdout, toBuffer(response.stdout));
      await deliverAll(io.stderr, toBuffer(response.stderr));
      const timedOut = response.timedOut === true;
      const exitSignal = response.signal ?? null;
      return {
        exitCode: timedOut ? null : response.exitCode,
        signal: exitSignal,
        reason: timedOut ? "timeout" : exitSignal ? "signal" : "exit",
      };
    },
  };
}
