/**
 * The `app-proxy` transport: the runner app inside the workspace, reached through Coder's
 * path-based app proxy (`/@<owner>/<workspace>.<agent>/apps/<slug>/`) with the session token in the
 * `coder_session_token` cookie, which Coder strips before the request reaches the runner. The
 * stream route (a WebSocket: stdin, live binary-safe output, group kill, remote deadline) when the
 * runner's `/healthz` offers it; otherwise the seed's buffered `POST /run`.
 */
import {
  apiErrorFromUpgradeRefusal,
  createBufferedRunner,
  createStreamedProcessRunner,
  createVendorCall,
  createVendorClient,
  isProviderApiError,
  ProviderApiError,
  shellQuote,
  type ScriptRunner,
  type StreamedProcess,
  type StreamedProcessApi,
  type StreamedProcessExit,
  type VendorClient,
} from "@paperclip-sandbox/kit";
import WebSocket from "ws";
import { coderErrorFields } from "../coder-api.js";
import {
  frame,
  MAX_STDIN_MESSAGE,
  MSG_ERROR,
  MSG_EXIT,
  MSG_SIGNAL,
  MSG_START,
  MSG_STARTED,
  MSG_STDERR,
  MSG_STDIN,
  MSG_STDIN_END,
  MSG_STDOUT,
  parseHealth,
  STREAM_CAPABILITIES,
  type RunnerHealth,
} from "../runner-protocol.js";

export interface AppProxyTarget {
  coderUrl: string;
  token: string;
  owner: string;
  workspace: string;
  agent: string;
  slug: string;
}

const SESSION_COOKIE = "coder_session_token";

/** The app's root URL (with its trailing slash, which Coder's proxy insists on). */
function appUrl(target: AppProxyTarget): string {
  return `${target.coderUrl}/@${target.owner}/${target.workspace}.${target.agent}/apps/${target.slug}/`;
}

function appClient(target: AppProxyTarget, timeoutMs = 30_000): VendorClient {
  return createVendorClient({
    vendor: "coder",
    baseUrl: appUrl(target),
    headers: { cookie: `${SESSION_COOKIE}=${target.token}` },
    timeoutMs,
    retry: false,
    extractError: coderErrorFields,
  });
}

/** `GET /healthz` of the runner: which routes it offers. Rejects (502 and the like) when the app is not reachable. */
export async function probeRunner(target: AppProxyTarget, signal?: AbortSignal): Promise<RunnerHealth> {
  const response = await appClient(target, 15_000).request({ operation: "runnerHealth", path: "healthz", idempotent: true, signal });
  const text = await response.text();
  try {
    return parseHealth(JSON.parse(text));
  } catch {
    return parseHealth(undefined);
  }
}

/** The runner's command line for an argv: bash runs it, `exec` hands the group to the program. */
function commandOf(argv: readonly string[]): string {
  return `exec ${argv.map(shellQuote).join(" ")}`;
}

/**
 * The upgrade goes through the kit's vendor call: a refusal that certainly started nothing (a rate
 * limit, a busy or restarting proxy, a connection that failed before the runner said STARTED) is
 * tried again, up to 3 times in all, honouring Retry-After; nothing after STARTED is ever repeated.
 */
const upgradeCall = createVendorCall({ translate: (error) => error, retry: { attempts: 3, totalMs: 30_000, baseDelayMs: 250, maxDelayMs: 5_000 } });

/** The stream route as the kit's streamed-process API: one WebSocket per command. */
function streamApi(target: AppProxyTarget, baseEnv: Record<string, string>): StreamedProcessApi {
  const once = streamApiOnce(target, baseEnv);
  return {
    start: (spec, output) => upgradeCall("runnerStream", () => once.start(spec, output), { idempotent: false, signal: spec.signal }),
  };
}

function streamApiOnce(target: AppProxyTarget, baseEnv: Record<string, string>): StreamedProcessApi {
  const url = `${appUrl(target).replace(/^http/, "ws")}stream`;
  return {
    start(spec, output) {
      return new Promise<StreamedProcess>((resolveStart, rejectStart) => {
        const socket = new WebSocket(url, { headers: { cookie: `${SESSION_COOKIE}=${target.token}` }, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 });
        let started = false;
        let settleExit: { resolve(exit: StreamedProcessExit): void; reject(error: Error): void } | undefined;
        const exited = new Promise<StreamedProcessExit>((resolve, reject) => (settleExit = { resolve, reject }));
        exited.catch(() => undefined);
        let ended = false;
        // Output handlers may return a promise (back-pressure): messages wait in order behind it.
        let delivery: Promise<void> = Promise.resolve();
        const fail = (error: Error) => {
          if (ended) return;
          ended = true;
          if (started) settleExit!.reject(error);
          else rejectStart(error);
          socket.terminate();
        };
        const onAbort = () => socket.terminate();
        spec.signal.addEventListener("abort", onAbort, { once: true });

        socket.on("unexpected-response", (_request, response) => {
          void apiErrorFromUpgradeRefusal(response, { vendor: "coder", operation: "runnerStream", extractError: coderErrorFields, secrets: [target.token] }).then(fail);
        });
        socket.on("error", (error) =>
          fail(new ProviderApiError({ vendor: "coder", operation: "runnerStream", status: 0, code: "network", detail: error.message, retryable: true, gone: false, mayHaveTakenEffect: started })),
        );
        socket.on("open", () => {
          socket.send(
            frame(MSG_START, {
              script: commandOf(spec.argv),
              env: { ...baseEnv, ...(spec.env ?? {}) },
              envMode: "replace",
              stdin: spec.stdin,
              ...(spec.timeoutMs !== undefined ? { timeoutMs: Math.max(1, Math.ceil(spec.timeoutMs)) } : {}),
            }),
          );
        });
        socket.on("message", (data: Buffer) => {
          const type = data[0];
          const payload = data.subarray(1);
          if (type === MSG_STARTED && !started) {
            started = true;
            const { pid } = JSON.parse(payload.toString("utf8")) as { pid: number };
            resolveStart({
              pid,
              exited,
              writeStdin: (chunk) =>
                new Promise<void>((resolve, reject) => {
                  if (ended || socket.readyState !== WebSocket.OPEN) return reject(new Error("the command has ended"));
                  const pieces: Buffer[] = [];
                  for (let at = 0; at < chunk.length; at += MAX_STDIN_MESSAGE) pieces.push(chunk.subarray(at, at + MAX_STDIN_MESSAGE));
                  pieces.forEach((piece, index) => socket.send(frame(MSG_STDIN, piece), index === pieces.length - 1 ? (error) => (error ? reject(error) : resolve()) : undefined));
                }),
              closeStdin: async () => {
                if (!ended && socket.readyState === WebSocket.OPEN) socket.send(frame(MSG_STDIN_END));
              },
              kill: async (signal) => {
                if (!ended && socket.readyState === WebSocket.OPEN) socket.send(frame(MSG_SIGNAL, signal === "SIGKILL" ? { graceMs: 0 } : {}));
              },
            });
          } else if (type === MSG_STDOUT || type === MSG_STDERR) {
            const sink = type === MSG_STDOUT ? output.stdout : output.stderr;
            const piece = Buffer.from(payload);
            delivery = delivery.then(async () => {
              const pending = sink(piece);
              if (pending) {
                socket.pause();
                await pending;
                socket.resume();
              }
            });
          } else if (type === MSG_EXIT) {
            const exit = JSON.parse(payload.toString("utf8")) as { exitCode: number | null; signal: string | null; timedOut: boolean };
            ended = true;
            spec.signal.removeEventListener("abort", onAbort);
            void delivery.then(() => settleExit!.resolve({ exitCode: exit.exitCode, signal: exit.signal, timedOut: exit.timedOut }));
          } else if (type === MSG_ERROR) {
            const error = JSON.parse(payload.toString("utf8")) as { error?: string; message?: string };
            fail(
              new ProviderApiError({
                vendor: "coder",
                operation: "runnerStart",
                status: 400,
                code: error.error ?? "runner_error",
                detail: error.message ?? "the runner refused the command",
                retryable: false,
                gone: false,
                mayHaveTakenEffect: false,
              }),
            );
          }
        });
        socket.on("close", (code) => {
          spec.signal.removeEventListener("abort", onAbort);
          fail(
            new ProviderApiError({
              vendor: "coder",
              operation: "runnerStream",
              status: 0,
              code: "connection_reset",
              detail: `the runner's stream closed before the command's exit (WebSocket ${code})`,
              retryable: false,
              gone: false,
              mayHaveTakenEffect: true,
            }),
          );
        });
      });
    },
  };
}

/** The stream route: live, binary-safe, stdin with EOF; an abort ends the whole group in the workspace. */
export function streamRunner(target: AppProxyTarget, baseEnv: Record<string, string>): ScriptRunner {
  const runner = createStreamedProcessRunner({
    api: streamApi(target, baseEnv),
    remoteTimeout: true,
    // Stdin rides on the same socket as the command: inlining it would save no call.
    inlineStdinMaxBytes: 0,
    maxStdinChunkBytes: 4 * MAX_STDIN_MESSAGE,
  });
  // The runner signals the command's process group (not only its pid).
  return { capabilities: STREAM_CAPABILITIES, run: (script, io) => runner.run(script, io) };
}

/**
 * The seed's `POST /run`: everything in, everything out. Binary-safe only when the runner speaks
 * base64 (ours does; a runner of the seed's contract alone returns text).
 */
export function bufferedRunner(target: AppProxyTarget, baseEnv: Record<string, string>, health: RunnerHealth): ScriptRunner {
  const base64 = health.base64;
  return createBufferedRunner({
    capabilities: {
      binarySafe: base64,
      separateStderr: true,
      remoteTimeout: true,
      // Our runner ends the group when the request goes away; another runner may not.
      signals: health.stream || base64 ? "group" : "none",
      maxStdinBytes: 48 * 1024 * 1024,
    },
    async exec(request) {
      const client = appClient(target, (request.timeoutMs ?? 86_400_000) + 60_000);
      const body = {
        script: commandOf(["/bin/sh", "-c", request.script]),
        stdin: request.stdin === undefined ? null : base64 ? request.stdin.toString("base64") : request.stdin.toString("utf8"),
        env: { ...baseEnv, ...(request.env ?? {}) },
        envMode: "replace",
        ...(request.timeoutMs !== undefined ? { timeoutMs: Math.max(1, Math.ceil(request.timeoutMs)) } : {}),
        ...(base64 ? { encoding: "base64" } : {}),
      };
      const result = await client.json<{ exitCode: number | null; signal: string | null; timedOut: boolean; stdout: string; stderr: string; encoding?: string }>({
        operation: "runnerRun",
        method: "POST",
        path: "run",
        json: body,
        idempotent: false,
        signal: request.signal,
      });
      const decode = (text: string) => (result.encoding === "base64" ? Buffer.from(text, "base64") : text);
      return { exitCode: result.exitCode, signal: result.signal, timedOut: result.timedOut, stdout: decode(result.stdout ?? ""), stderr: decode(result.stderr ?? "") };
    },
  });
}

/** True for an error that says the workspace (or its agent or app) is not running: start it and retry. */
export function appNotRunning(error: unknown): boolean {
  return isProviderApiError(error) && (error.status === 502 || error.status === 503);
}
