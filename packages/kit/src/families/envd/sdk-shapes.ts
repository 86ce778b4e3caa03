/**
 * The parts of an E2B-family SDK's sandbox object the kit uses, typed structurally: the `e2b` SDK
 * and its fork `novita-sandbox` have the same shapes (the same envd protos, the same Filesystem
 * class), so one adapter serves both without the kit depending on either.
 */
import type { EnvdRpcEndpoint } from "./stream-input.js";

/** `process.ProcessSelector` as protobuf-es init object. */
interface EnvdProcessSelector {
  selector: { case: "pid"; value: number };
}

/** The events of `process.Process/Start`, as protobuf-es decodes them (oneofs as `{case, value}`). */
export interface EnvdProcessEvent {
  event?: {
    event:
      | { case: "start"; value: { pid: number } }
      | { case: "data"; value: { output: { case: "stdout" | "stderr" | "pty"; value: Uint8Array } | { case: undefined; value?: undefined } } }
      | { case: "end"; value: { exitCode: number; exited: boolean; status: string; error?: string } }
      | { case: "keepalive"; value: unknown }
      | { case: undefined; value?: undefined };
  };
}

interface EnvdCallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

/** The SDK's generated `process.Process` client (`sandbox.commands.rpc`): the raw RPCs, bytes kept as bytes. */
export interface EnvdProcessRpc {
  start(
    request: { process: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string }; stdin?: boolean; pty?: { size: { cols: number; rows: number } } },
    options?: EnvdCallOptions,
  ): AsyncIterable<EnvdProcessEvent>;
  sendInput(request: { process: EnvdProcessSelector; input: { input: { case: "stdin" | "pty"; value: Uint8Array } } }, options?: EnvdCallOptions): Promise<unknown>;
  /** Resizes a PTY process's terminal. */
  update?(request: { process: EnvdProcessSelector; pty: { size: { cols: number; rows: number } } }, options?: EnvdCallOptions): Promise<unknown>;
  closeStdin(request: { process: EnvdProcessSelector }, options?: EnvdCallOptions): Promise<unknown>;
  sendSignal(request: { process: EnvdProcessSelector; signal: number }, options?: EnvdCallOptions): Promise<unknown>;
}

/** `sandbox.files`: envd's REST `/files` upload and download. */
export interface EnvdFiles {
  write(path: string, data: Blob | ReadableStream<Uint8Array>, opts?: { requestTimeoutMs?: number; signal?: AbortSignal; useOctetStream?: boolean }): Promise<unknown>;
  read(path: string, opts: { format: "stream"; requestTimeoutMs?: number; signal?: AbortSignal }): Promise<ReadableStream<Uint8Array>>;
}

/** An SDK `Sandbox` instance connected to one sandbox (it holds the envd access token). */
export interface EnvdSandboxLike {
  readonly sandboxId: string;
  readonly commands: object;
  readonly files: EnvdFiles;
}

/** `process.Signal` enum values. */
export const ENVD_SIGNAL = { SIGTERM: 15, SIGKILL: 9 } as const;

/**
 * The generated process client the SDK builds for `sandbox.commands` (a protected member in both
 * SDKs). The public `commands.run` decodes output as UTF-8 text and wraps the command in
 * `bash -l`; the raw client keeps bytes and runs `sh -c` as the kit's runner contract says.
 */
export function processRpcOf(sandbox: EnvdSandboxLike): EnvdProcessRpc {
  const rpc = (sandbox.commands as { rpc?: Partial<EnvdProcessRpc> }).rpc;
  if (!rpc || typeof rpc.start !== "function" || typeof rpc.sendInput !== "function" || typeof rpc.closeStdin !== "function" || typeof rpc.sendSignal !== "function") {
    throw new TypeError("this SDK's sandbox.commands has no envd process client (rpc.start/sendInput/closeStdin/sendSignal): the pinned SDK version is required");
  }
  return rpc as EnvdProcessRpc;
}

/** The envd connection fields of an SDK sandbox (protected members in both SDKs). */
interface EnvdConnectionFields {
  envdApiUrl?: unknown;
  envdAccessToken?: unknown;
  envdPort?: unknown;
  connectionConfig?: { headers?: Record<string, string>; proxy?: unknown };
}

/**
 * Where this SDK sandbox's envd Connect calls go and the headers its transport adds: the sandbox
 * routing pair (`<Prefix>-Sandbox-Id`/`-Port`: `E2b`, `Novita`), the envd access token, and the
 * connection's headers (`all`, as Novita's transport sends them, or only the `User-Agent`, as
 * e2b's does). Undefined when the SDK goes through an HTTP proxy or lacks these fields.
 */
export function envdRpcEndpointOf(sandbox: EnvdSandboxLike, routingHeaderPrefix: string, connectionHeaders: "all" | "user-agent"): EnvdRpcEndpoint | undefined {
  const fields = sandbox as unknown as EnvdConnectionFields;
  if (typeof fields.envdApiUrl !== "string" || typeof fields.envdPort !== "number") return undefined;
  if (fields.connectionConfig?.proxy) return undefined;
  const configured = fields.connectionConfig?.headers ?? {};
  const userAgent = Object.entries(configured).find(([name]) => name.toLowerCase() === "user-agent");
  const base: Record<string, string> = connectionHeaders === "all" ? { ...configured } : userAgent ? { "User-Agent": userAgent[1] } : {};
  const headers: Record<string, string> = { ...base, [`${routingHeaderPrefix}-Sandbox-Id`]: sandbox.sandboxId, [`${routingHeaderPrefix}-Sandbox-Port`]: String(fields.envdPort) };
  if (typeof fields.envdAccessToken === "string" && fields.envdAccessToken) headers["X-Access-Token"] = fields.envdAccessToken;
  return { baseUrl: fields.envdApiUrl, headers };
}
