import { randomUUID } from "node:crypto";
import {
  DUPLEX_CHANNEL_DATA_NOTIFICATION,
  DUPLEX_CHANNEL_EXIT_NOTIFICATION,
  JSONRPC_ERROR_CODES,
  LOGIN_PTY_EXIT_NOTIFICATION,
  LOGIN_PTY_OUTPUT_NOTIFICATION,
  PLUGIN_RPC_ERROR_CODES,
  decodeChannelBytes,
} from "@paperclipai/plugin-sdk";
import { WorkerRpcError } from "./errors.js";

export type ExecuteLogListener = (stream: "stdout" | "stderr", chunk: string) => void;
export type WorkerLogListener = (entry: { level: string; message: string }) => void;

/** Receives one duplex channel's `duplexChannel.data` chunks and its `duplexChannel.exit`. */
export interface DuplexChannelListener {
  onData(chunk: Buffer, workerSessionId: string): void;
  onExit(exit: { exitCode: number | null; transportClosed: boolean; workerSessionId: string }): void;
}

/** Receives one login pseudo-terminal's `loginPty.output` text and its `loginPty.exit`. */
export interface LoginPtyListener {
  onOutput(chunk: string, workerSessionId: string): void;
  onExit(exit: { exitCode: number | null; workerSessionId: string }): void;
}

export interface RpcCallOptions {
  timeoutMs: number;
  onLog?: ExecuteLogListener;
  invocationId?: string;
}

interface PendingCall {
  method: string;
  invocationId: string;
  resolve(result: unknown): void;
  reject(error: WorkerRpcError): void;
  timer: NodeJS.Timeout;
}

type JsonObject = Record<string, unknown>;

/**
 * The host half of the JSON-RPC conversation with one worker: numbers requests, matches
 * responses, routes `execute.log` chunks to the call whose invocation id they carry and duplex
 * channel notifications to their route's listener, and answers the worker's own requests. It knows nothing about processes; `write` sends a line.
 */
export class RpcConnection {
  private nextId = 1;
  private readonly pending = new Map<number, PendingCall>();
  private readonly logRoutes = new Map<string, ExecuteLogListener>();
  private readonly duplexRoutes = new Map<string, DuplexChannelListener>();
  private readonly loginRoutes = new Map<string, LoginPtyListener>();
  private closedReason: string | null = null;

  constructor(
    private readonly write: (line: string) => void,
    private readonly onWorkerLog?: WorkerLogListener,
  ) {}

  get pendingCount(): number {
    return this.pending.size;
  }

  call(method: string, params: unknown, opts: RpcCallOptions): Promise<unknown> {
    if (this.closedReason !== null) {
      return Promise.reject(new WorkerRpcError(method, PLUGIN_RPC_ERROR_CODES.WORKER_UNAVAILABLE, this.closedReason));
    }
    const id = this.nextId++;
    const invocationId = opts.invocationId ?? randomUUID();
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(id)?.reject(new WorkerRpcError(method, PLUGIN_RPC_ERROR_CODES.TIMEOUT, `timed out after ${opts.timeoutMs}ms`));
      }, opts.timeoutMs);
      this.pending.set(id, { method, invocationId, resolve, reject, timer });
      if (opts.onLog) this.logRoutes.set(invocationId, opts.onLog);
      try {
        this.write(
          serialize({
            jsonrpc: "2.0",
            id,
            method,
            params,
            // Like the host: a fresh opaque invocation per call, scoped to the params' company.
            paperclipInvocation: { id: invocationId, scope: invocationScope(params) },
          }),
        );
      } catch (error) {
        this.settle(id)?.reject(new WorkerRpcError(method, PLUGIN_RPC_ERROR_CODES.WORKER_UNAVAILABLE, `could not write to worker: ${describe(error)}`));
      }
    });
  }

  /** Route a duplex channel's notifications (by host route id) to `listener` until its exit. */
  routeDuplex(hostRouteId: string, listener: DuplexChannelListener): () => void {
    this.duplexRoutes.set(hostRouteId, listener);
    return () => {
      if (this.duplexRoutes.get(hostRouteId) === listener) this.duplexRoutes.delete(hostRouteId);
    };
  }

  /** Route a login pseudo-terminal's notifications (by host route id) to `listener` until its exit. */
  routeLoginPty(hostRouteId: string, listener: LoginPtyListener): () => void {
    this.loginRoutes.set(hostRouteId, listener);
    return () => {
      if (this.loginRoutes.get(hostRouteId) === listener) this.loginRoutes.delete(hostRouteId);
    };
  }

  /** Feed one NDJSON line from the worker's stdout. */
  handleLine(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      // The worker printed something that is not protocol (e.g. a stray console.log).
      this.onWorkerLog?.({ level: "warn", message: `non-JSON line on worker stdout (${line.length} chars)` });
      return;
    }
    if (!isObject(message) || message.jsonrpc !== "2.0") return;
    const hasId = typeof message.id === "number" || typeof message.id === "string";
    if (typeof message.method === "string") {
      if (hasId) this.answerWorkerRequest(message.id as number | string, message.method, message.params);
      else this.handleNotification(message.method, message.params, message.paperclipInvocationId);
      return;
    }
    if (hasId && ("result" in message || "error" in message)) this.handleResponse(message);
  }

  /** The worker is gone: every pending call fails with WORKER_UNAVAILABLE, later calls too. */
  close(reason: string): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    for (const id of [...this.pending.keys()]) {
      const call = this.settle(id);
      call?.reject(new WorkerRpcError(call.method, PLUGIN_RPC_ERROR_CODES.WORKER_UNAVAILABLE, reason));
    }
  }

  private handleResponse(message: JsonObject): void {
    const id = typeof message.id === "number" ? message.id : Number(message.id);
    const call = this.settle(id);
    if (!call) return; // already timed out, or not ours
    if (isObject(message.error)) {
      const code = typeof message.error.code === "number" ? message.error.code : PLUGIN_RPC_ERROR_CODES.UNKNOWN;
      const text = typeof message.error.message === "string" ? message.error.message : "worker error";
      call.reject(new WorkerRpcError(call.method, code, text, message.error.data));
    } else {
      call.resolve(message.result);
    }
  }

  private handleNotification(method: string, params: unknown, invocationId: unknown): void {
    if (method === "execute.log") {
      // Routed by the envelope's invocation id only, as the host does; anything malformed is dropped.
      if (typeof invocationId !== "string" || !isObject(params)) return;
      const { stream, chunk } = params;
      if ((stream !== "stdout" && stream !== "stderr") || typeof chunk !== "string" || chunk.length === 0) return;
      this.logRoutes.get(invocationId)?.(stream, chunk);
    } else if (method === DUPLEX_CHANNEL_DATA_NOTIFICATION || method === DUPLEX_CHANNEL_EXIT_NOTIFICATION) {
      if (!isObject(params) || typeof params.hostRouteId !== "string" || typeof params.workerSessionId !== "string") return;
      const route = this.duplexRoutes.get(params.hostRouteId);
      if (!route) return;
      if (method === DUPLEX_CHANNEL_DATA_NOTIFICATION) {
        const bytes = decodeChannelBytes(params.chunk);
        if (bytes !== null) route.onData(Buffer.from(bytes), params.workerSessionId);
      } else {
        this.duplexRoutes.delete(params.hostRouteId);
        route.onExit({
          exitCode: typeof params.exitCode === "number" ? params.exitCode : null,
          transportClosed: params.transportClosed === true,
          workerSessionId: params.workerSessionId,
        });
      }
    } else if (method === LOGIN_PTY_OUTPUT_NOTIFICATION || method === LOGIN_PTY_EXIT_NOTIFICATION) {
      // Like the host: routed by host route id; a chunk that is not a non-empty string is dropped.
      if (!isObject(params) || typeof params.hostRouteId !== "string" || typeof params.workerSessionId !== "string") return;
      const route = this.loginRoutes.get(params.hostRouteId);
      if (!route) return;
      if (method === LOGIN_PTY_OUTPUT_NOTIFICATION) {
        if (typeof params.chunk === "string" && params.chunk.length > 0) route.onOutput(params.chunk, params.workerSessionId);
      } else {
        this.loginRoutes.delete(params.hostRouteId);
        route.onExit({ exitCode: typeof params.exitCode === "number" ? params.exitCode : null, workerSessionId: params.workerSessionId });
      }
    } else if (method === "log") {
      this.forwardWorkerLog(params);
    }
  }

  private answerWorkerRequest(id: number | string, method: string, params: unknown): void {
    if (method === "log") {
      this.forwardWorkerLog(params);
      this.send({ jsonrpc: "2.0", id, result: null });
      return;
    }
    // This client is not a full host (no state, events, spans...). Answering at once keeps the
    // worker from waiting out its own 30 s timeout.
    this.send({
      jsonrpc: "2.0",
      id,
      error: { code: JSONRPC_ERROR_CODES.METHOD_NOT_FOUND, message: `Host does not handle method "${method}"` },
    });
  }

  private forwardWorkerLog(params: unknown): void {
    if (!this.onWorkerLog || !isObject(params)) return;
    const level = typeof params.level === "string" ? params.level : "info";
    const message = typeof params.message === "string" ? params.message : "";
    this.onWorkerLog({ level, message });
  }

  private send(message: JsonObject): void {
    try {
      this.write(serialize(message));
    } catch {
      // The worker exited between its request and our answer; nothing is waiting for it.
    }
  }

  private settle(id: number): PendingCall | undefined {
    const call = this.pending.get(id);
    if (!call) return undefined;
    this.pending.delete(id);
    clearTimeout(call.timer);
    this.logRoutes.delete(call.invocationId);
    return call;
  }
}

function invocationScope(params: unknown): JsonObject {
  const companyId = isObject(params) ? params.companyId : undefined;
  return typeof companyId === "string" && companyId.trim() ? { companyId: companyId.trim() } : {};
}

function serialize(message: JsonObject): string {
  return `${JSON.stringify(message)}\n`;
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
