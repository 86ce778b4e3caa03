import {
  createFileStdioRunner,
  createStreamedProcessRunner,
  ProviderApiError,
  withRemoteGroupKill,
  type FileTransport,
  type ScriptRunner,
  type ServerSentEvent,
  type StreamedProcess,
  type StreamedProcessExit,
  type StreamedProcessOutput,
  type StreamedProcessSpec,
} from "@paperclip-sandbox/kit";
import type { BridgeClient } from "./bridge-client.js";
import { execFiles } from "./exec-files.js";
import { inSession, NO_TIMEOUT_MS, type RunnerTarget } from "./sessions.js";

/** The bridge's file routes (our bridge only): one streamed request each way. */
export function bridgeFiles(client: BridgeClient, providerLeaseId: string): FileTransport {
  return {
    upload: (path, source, opts) => client.upload(providerLeaseId, path, source, opts?.mode, opts?.signal),
    download: (path, opts) => client.download(providerLeaseId, path, opts?.signal),
  };
}

/**
 * Against a bridge from upstream's template: its `POST /exec` (no stdin stream, text output) as a
 * full ScriptRunner. The kit's file-stdio runner carries stdout, stderr and the exit status back
 * base64 between markers (binary-safe, whatever the container does to text: 0.7.x drops the last
 * newline of a foreground command's output); stdin up to 48 KiB rides in the command, more is
 * written first through the exec's own `stdin` field (`execFiles`); the bridge enforces the
 * deadline; an abort ends the group from a second command. One request per command.
 */
export function legacyBridgeRunner(client: BridgeClient, target: RunnerTarget, opts: { stdinField?: boolean } = {}): ScriptRunner {
  return withRemoteGroupKill(
    createFileStdioRunner({
      // `stdinField: false` (benchmarks only): every stdin inside the command, as a bridge exec without a stdin field would force.
      ...(opts.stdinField === false ? {} : { files: execFiles(client, target) }),
      remoteTimeout: true,
      exec: ({ command, timeoutMs, signal }) =>
        inSession(target, async (sessionId) => {
          const answer = await client.exec(
            { providerLeaseId: target.providerLeaseId, command: "/bin/sh", args: ["-c", command], timeoutMs: timeoutMs ?? NO_TIMEOUT_MS, sessionStrategy: target.sessionStrategy, sessionId },
            signal,
          );
          // The 0.7.x container re-joins a foreground command's output lines, dropping the last
          // newline; the markers' parser wants the exit line whole.
          return { exitCode: answer.exitCode, output: `${answer.stdout}\n`, timedOut: answer.timedOut };
        }),
    }),
  );
}

/**
 * With this repository's bridge (`streams`): each command a streamed process, so the kit's full
 * contract holds: stdin streamed in parts (or, when small and known, inside the command: one request
 * per execute), output live and binary-safe, an abort that ends the whole group (the bridge signals
 * the group the process leads), the bridge's deadline. Duplex channels run over it.
 */
export function bridgeProcessRunner(client: BridgeClient, target: RunnerTarget): ScriptRunner {
  const runner = createStreamedProcessRunner({
    remoteTimeout: true,
    api: { start: (spec, output) => startProcess(client, target, spec, output) },
  });
  // The bridge's kill reaches the process group, not only a pid.
  return { capabilities: Object.freeze({ ...runner.capabilities, signals: "group" as const }), run: (script, io) => runner.run(script, io) };
}

interface Started {
  processId: string;
  pid: number;
}

const failed = (operation: string, detail: string) =>
  new ProviderApiError({ vendor: "cloudflare", operation, status: 0, code: "stream_failed", detail, retryable: false, gone: false, mayHaveTakenEffect: true });

async function startProcess(client: BridgeClient, target: RunnerTarget, spec: StreamedProcessSpec, output: StreamedProcessOutput): Promise<StreamedProcess> {
  const session = target.sessionStrategy === "named" ? target.sessions.take() : "default";
  const giveBack = once(() => target.sessionStrategy === "named" && target.sessions.give(session));
  let events: AsyncGenerator<ServerSentEvent>;
  try {
    events = await client.startProcess(
      {
        providerLeaseId: target.providerLeaseId,
        command: spec.argv[0]!,
        args: spec.argv.slice(1),
        ...(spec.env ? { env: spec.env } : {}),
        timeoutMs: spec.timeoutMs ?? NO_TIMEOUT_MS,
        sessionStrategy: target.sessionStrategy,
        sessionId: session,
        stdinStream: spec.stdin,
      },
      spec.signal,
    );
  } catch (error) {
    giveBack();
    throw error;
  }

  let onStart!: (started: Started | null) => void;
  const started = new Promise<Started | null>((resolve) => (onStart = resolve));
  const exited = (async (): Promise<StreamedProcessExit> => {
    try {
      for await (const { event, data } of events) {
        if (event === "start") onStart(JSON.parse(data) as Started);
        else if (event === "stdout" || event === "stderr") await output[event](Buffer.from((JSON.parse(data) as { base64: string }).base64, "base64"));
        else if (event === "complete") {
          const result = JSON.parse(data) as { exitCode: number | null; timedOut?: boolean };
          return { exitCode: result.exitCode, signal: null, ...(result.timedOut ? { timedOut: true } : {}) };
        } else if (event === "error") throw failed("exec", (JSON.parse(data) as { error?: string }).error ?? "the bridge's command stream failed");
      }
      throw failed("exec", "the bridge's command stream ended without a completion event");
    } finally {
      onStart(null);
      giveBack();
    }
  })();
  // Read by the kit once the start resolved; a stream that broke before that must not go unhandled.
  exited.catch(() => undefined);
  const process = await Promise.race([started, exited.then(() => null)]);
  if (!process) {
    // Ended before it ran (e.g. the bridge could not make its pipes): its exit is all there is.
    return { pid: 0, exited, writeStdin: () => Promise.reject(new Error("the process is not running")), closeStdin: async () => undefined, kill: async () => undefined };
  }
  let seq = 0;
  return {
    pid: process.pid,
    exited,
    writeStdin: (chunk) => client.writeStdin(target.providerLeaseId, process.processId, seq++, chunk),
    closeStdin: () => client.closeStdin(target.providerLeaseId, process.processId, seq),
    kill: (signal) => client.killProcess(target.providerLeaseId, process.processId, signal),
  };
}

function once(fn: () => unknown): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
