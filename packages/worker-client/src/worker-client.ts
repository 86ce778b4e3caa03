import { fork, type ChildProcess } from "node:child_process";
import { createRedactor } from "@paperclip-sandbox/kit";
import { NdjsonLineSplitter } from "./ndjson-reader.js";
import { RpcConnection } from "./rpc-connection.js";
import { UNKNOWN, WorkerRpcError } from "./errors.js";
import { buildWorkerEnv } from "./worker-env.js";
import { environmentMethods, type CallOptions, type EnvironmentMethods } from "./environment-methods.js";
import { duplexMethods, type DuplexMethods } from "./duplex-methods.js";
import { loginPtyMethods, type LoginPtyMethods } from "./login-methods.js";
import type { PluginPackage } from "./plugin-package.js";
import { DEFAULT_INIT_TIMEOUT_MS, DEFAULT_SHUTDOWN_GRACE_MS, SIGTERM_GRACE_MS, hostTimeoutFor } from "./timeouts.js";

export interface StartWorkerOptions {
  /** Added to the scrubbed host environment (the only way to pass provider credentials). */
  env?: Record<string, string>;
  /** The node binary; defaults to the one running this process. */
  nodePath?: string;
  initTimeoutMs?: number;
  /** Sent as `initialize.config`. */
  config?: Record<string, unknown>;
  onStderr?: (line: string) => void;
  /** Worker `ctx.logger` output (the `log` notification or request). */
  onLog?: (entry: { level: string; message: string }) => void;
}

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerClient {
  readonly pid: number;
  readonly supportedMethods: readonly string[];
  readonly pkg: PluginPackage;
  call<T = unknown>(method: string, params: unknown, opts?: CallOptions): Promise<T>;
  readonly env: EnvironmentMethods;
  /** Persistent duplex channels (`duplexChannel*` methods and their notifications). */
  readonly duplex: DuplexMethods;
  /** The agent login on a pseudo-terminal (`loginPty*` methods and their notifications). */
  readonly login: LoginPtyMethods;
  /** `shutdown` RPC, then up to `graceMs` (default 10 s) for the exit, then SIGTERM, then SIGKILL. */
  shutdown(opts?: { graceMs?: number }): Promise<void>;
  kill(signal?: NodeJS.Signals): void;
  readonly exited: Promise<WorkerExit>;
}

const STDERR_EXCERPT_CHARS = 4_000;
/** After the shutdown response the SDK exits on the next tick; this covers that gap. */
const POST_SHUTDOWN_EXIT_WAIT_MS = 500;

/** Fork the plugin's built worker exactly as the host does, then `initialize` it. */
export async function startWorker(pkg: PluginPackage, opts: StartWorkerOptions = {}): Promise<WorkerClient> {
  const child = fork(pkg.workerPath, [], {
    // Same shape as the host: NDJSON over stdin/stdout, stderr captured, an (unused) IPC channel.
    stdio: ["pipe", "pipe", "pipe", "ipc"],
    execArgv: [], // never inherit our own flags (test runners, loaders) into the worker
    execPath: opts.nodePath ?? process.execPath,
    env: buildWorkerEnv(pkg.manifest.id, opts.env),
    cwd: pkg.dir,
  });

  let stderrTail = "";
  // Whatever the caller passed in the worker env may be a credential: keep it out of error messages.
  const redact = createRedactor(Object.values(opts.env ?? {}));

  const rpc = new RpcConnection((line) => {
    if (!child.stdin || child.stdin.destroyed || !child.stdin.writable) throw new Error("worker stdin is closed");
    child.stdin.write(line);
  }, opts.onLog);

  // EPIPE on a dead worker's stdin must not crash the caller; the exit handler reports it.
  child.stdin?.on("error", () => undefined);
  const stdout = new NdjsonLineSplitter((line) => rpc.handleLine(line));
  child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk));
  child.stdout?.on("end", () => stdout.end());
  const stderr = new NdjsonLineSplitter((line) => {
    stderrTail = (stderrTail + line + "\n").slice(-STDERR_EXCERPT_CHARS);
    opts.onStderr?.(line);
  });
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk));
  child.stderr?.on("end", () => stderr.end());
  // The IPC channel exists only because the host forks with one; keep it from holding us open.
  child.channel?.unref();

  const exited = new Promise<WorkerExit>((resolve) => {
    child.once("exit", (code, signal) => {
      rpc.close(`worker exited (code=${code}, signal=${signal})`);
      resolve({ code, signal });
    });
    child.once("error", (error) => {
      rpc.close(`worker failed: ${error.message}`);
      if (child.exitCode === null && child.signalCode === null && child.pid === undefined) {
        resolve({ code: null, signal: null });
      }
    });
  });

  const call = <T = unknown>(method: string, params: unknown, callOpts: CallOptions = {}): Promise<T> =>
    rpc.call(method, params, {
      timeoutMs: callOpts.timeoutMs ?? hostTimeoutFor(method, params),
      onLog: callOpts.onLog,
      invocationId: callOpts.invocationId,
    }) as Promise<T>;

  let supportedMethods: readonly string[];
  try {
    const result = await call<{ ok?: boolean; supportedMethods?: string[] }>(
      "initialize",
      {
        manifest: pkg.manifest,
        config: opts.config ?? {},
        instanceInfo: { instanceId: "paperclip-sandbox-worker-client", hostVersion: "0.0.0-worker-client" },
        apiVersion: 1,
        databaseNamespace: null,
      },
      { timeoutMs: opts.initTimeoutMs ?? DEFAULT_INIT_TIMEOUT_MS },
    );
    if (!result?.ok) throw new Error("initialize returned ok=false");
    supportedMethods = Object.freeze([...(result.supportedMethods ?? [])]);
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    const code = error instanceof WorkerRpcError ? error.code : undefined;
    const reason = error instanceof Error ? error.message : String(error);
    const excerpt = stderrTail.trim();
    // The worker's own error message may echo a credential too, not only its stderr.
    throw new WorkerRpcError("initialize", code ?? UNKNOWN, redact(`worker ${pkg.name} failed to initialize: ${reason}${excerpt ? `\nworker stderr:\n${excerpt}` : ""}`));
  }

  return {
    pid: child.pid ?? -1,
    supportedMethods,
    pkg,
    call,
    env: environmentMethods(call),
    duplex: duplexMethods(call, rpc),
    login: loginPtyMethods(call, rpc),
    exited,
    kill: (signal = "SIGTERM") => {
      if (isRunning(child)) child.kill(signal);
    },
    shutdown: (shutdownOpts) => shutdownWorker(child, call, exited, shutdownOpts?.graceMs ?? DEFAULT_SHUTDOWN_GRACE_MS),
  };
}

async function shutdownWorker(child: ChildProcess, call: (method: string, params: unknown, opts?: CallOptions) => Promise<unknown>, exited: Promise<WorkerExit>, graceMs: number): Promise<void> {
  if (!isRunning(child)) return;
  await Promise.race([call("shutdown", {}, { timeoutMs: graceMs }).catch(() => undefined), exited]);
  if (await exitsWithin(exited, POST_SHUTDOWN_EXIT_WAIT_MS)) return;
  child.kill("SIGTERM");
  if (await exitsWithin(exited, SIGTERM_GRACE_MS)) return;
  child.kill("SIGKILL");
  await exited;
}

function exitsWithin(exited: Promise<WorkerExit>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void exited.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

function isRunning(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}
