import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { createVendorClient, type ServerSentEvent, type VendorClient, type VendorErrorExtractor } from "@paperclip-sandbox/kit";
import type { CloudflareConfig } from "./config.js";

const API_PREFIX = "/api/paperclip-sandbox/v1";
/** Extra time a command's request gets over the command's own timeout. */
const EXEC_MARGIN_MS = 30_000;

/** What this repository's bridge adds to upstream's v1 contract (absent from a template bridge's health). */
export interface BridgeExtensions {
  files: boolean;
  leaseLabels: boolean;
  stdinBase64: boolean;
  streamDeadline: boolean;
  expiry: boolean;
  /** Streamed processes: binary-safe live output, stdin in parts, a kill that reaches the group. */
  streams: boolean;
  /** `GET /terminal`: a command on a pseudo-terminal over a WebSocket (login terminals). */
  terminal: boolean;
}

/** What starting a streamed process sends besides the command (the `streams` extension). */
export interface ProcessBody extends ExecBody {
  stdinStream: boolean;
}

export interface ExecBody {
  providerLeaseId: string;
  command: string;
  args: string[];
  timeoutMs: number;
  sessionStrategy: "named" | "default";
  sessionId: string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string | null;
}

export interface ExecAnswer {
  exitCode: number | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

export interface LeaseAnswer {
  providerLeaseId: string;
  metadata: Record<string, unknown>;
  /** Our bridge, when asked for a bound: when it destroys the sandbox. */
  expiresAt?: string | null;
}

export interface LeaseRecord {
  providerLeaseId: string;
  labels: Record<string, string>;
  createdAt: string;
  keepAlive: boolean;
  /** When the bridge destroys the sandbox (an alarm), if the acquire asked for a bound. */
  expiresAt?: string | null;
}

/** The bridge's error body `{error, message, details?}`: code and message. */
export const bridgeErrorFields: VendorErrorExtractor = ({ json, status }) => {
  const parsed = json as { error?: unknown; message?: unknown } | undefined;
  return {
    ...(typeof parsed?.error === "string" ? { code: parsed.error } : {}),
    ...(typeof parsed?.message === "string" && parsed.message.trim() !== "" ? { message: parsed.message } : {}),
    // A route the bridge does not have (an upstream-template bridge) is not a gone lease.
    gone: parsed?.error === "sandbox_state_lost" || parsed?.error === "lease_not_found",
    // Refused before the Worker ran it: the edge's rate limit, an unreachable or overloaded Worker.
    ...(status === 429 || status === 502 || status === 503 ? { notProcessed: true } : {}),
  };
};

/** The plugin's one way to the bridge: every call over the kit's vendor client (deadline, retry, redaction). */
export class BridgeClient {
  readonly api: VendorClient;
  private extensions: Promise<BridgeExtensions> | undefined;

  constructor(private readonly config: CloudflareConfig) {
    this.api = createVendorClient({
      vendor: "cloudflare",
      baseUrl: `${config.bridgeBaseUrl.replace(/\/+$/, "")}${API_PREFIX}`,
      headers: { authorization: `Bearer ${config.bridgeAuthToken}` },
      timeoutMs: config.bridgeRequestTimeoutMs,
      retry: { attempts: 3, totalMs: 30_000 },
      extractError: bridgeErrorFields,
    });
  }

  /** The bridge's extras, from its health answer (asked once per client; an upstream bridge has none). */
  extensionsOf(signal?: AbortSignal): Promise<BridgeExtensions> {
    this.extensions ??= this.api
      .json<{ capabilities?: { extensions?: Partial<Record<keyof BridgeExtensions, unknown>> } }>({ operation: "health", path: "/health", idempotent: true, ...(signal ? { signal } : {}) })
      .then((health) => {
        const ext = health?.capabilities?.extensions ?? {};
        return {
          files: ext.files === true,
          leaseLabels: ext.leaseLabels === true,
          stdinBase64: ext.stdinBase64 === true,
          streamDeadline: ext.streamDeadline === true,
          expiry: ext.expiry === true,
          streams: ext.streams === true,
          terminal: ext.terminal === true,
        };
      })
      .catch((error: unknown) => {
        this.extensions = undefined;
        throw error;
      });
    return this.extensions;
  }

  acquire(body: Record<string, unknown>, signal?: AbortSignal): Promise<LeaseAnswer> {
    return this.api.json<LeaseAnswer>({ operation: "acquireLease", method: "POST", path: "/leases/acquire", json: body, idempotent: false, ...(signal ? { signal } : {}) });
  }

  /**
   * Upstream's resume: the bridge checks the sandbox's sentinel (409 `sandbox_state_lost` without
   * it), rewrites it and sets keep-alive again. Null when the state is lost.
   */
  async resume(body: Record<string, unknown>): Promise<LeaseAnswer | null> {
    try {
      return await this.api.json<LeaseAnswer>({ operation: "resumeLease", method: "POST", path: "/leases/resume", json: body, idempotent: true });
    } catch (error) {
      if ((error as { gone?: boolean }).gone) return null;
      throw error;
    }
  }

  release(body: Record<string, unknown>): Promise<void> {
    return this.api.json({ operation: "releaseLease", method: "POST", path: "/leases/release", json: body, idempotent: true }).then(() => undefined);
  }

  destroy(providerLeaseId: string): Promise<void> {
    return this.api.json({ operation: "destroyLease", method: "DELETE", path: ["leases", providerLeaseId], idempotent: true }).then(() => undefined);
  }

  /** Our bridge's lease record (labels); null when it has none. */
  async lease(providerLeaseId: string): Promise<LeaseRecord | null> {
    try {
      return await this.api.json<LeaseRecord>({ operation: "getLease", path: ["leases", providerLeaseId], idempotent: true });
    } catch (error) {
      if ((error as { gone?: boolean }).gone) return null;
      throw error;
    }
  }

  async list(labels: Record<string, string>): Promise<LeaseRecord[]> {
    const answer = await this.api.json<{ leases: LeaseRecord[] }>({ operation: "listLeases", path: "/leases", query: { labels: JSON.stringify(labels) }, idempotent: true });
    return answer.leases;
  }

  exec(body: ExecBody, signal?: AbortSignal): Promise<ExecAnswer> {
    return this.api.json<ExecAnswer>({
      operation: "exec",
      method: "POST",
      path: "/exec",
      json: { ...body, streamOutput: false },
      // A command is never repeated: it may have run.
      idempotent: false,
      timeoutMs: Math.max(this.config.bridgeRequestTimeoutMs, body.timeoutMs + EXEC_MARGIN_MS),
      ...(signal ? { signal } : {}),
    });
  }

  /** Starts a streamed process: its events (`start`, `stdout`/`stderr` frames, `complete` or `error`). */
  startProcess(body: ProcessBody, signal?: AbortSignal): Promise<AsyncGenerator<ServerSentEvent>> {
    return this.api.events({
      operation: "startProcess",
      method: "POST",
      path: "/exec",
      json: { ...body, streamOutput: true, outputEncoding: "base64" },
      idempotent: false,
      // The stream lasts as long as the command (the bridge ends it at its timeout).
      timeoutMs: Math.max(this.config.bridgeRequestTimeoutMs, body.timeoutMs + EXEC_MARGIN_MS),
      ...(signal ? { signal } : {}),
    });
  }

  /** Stdin part `seq` of a streamed process (repeated only when it certainly did not arrive: a rewrite could meet the feeder reading it). */
  async writeStdin(providerLeaseId: string, processId: string, seq: number, bytes: Uint8Array): Promise<void> {
    await this.api.json({
      operation: "writeStdin",
      method: "PUT",
      path: ["exec", processId, "stdin"],
      query: { providerLeaseId, seq },
      headers: { "content-type": "application/octet-stream" },
      body: bytes,
      idempotent: false,
    });
  }

  async closeStdin(providerLeaseId: string, processId: string, seq: number): Promise<void> {
    await this.api.json({ operation: "closeStdin", method: "POST", path: ["exec", processId, "stdin", "close"], json: { providerLeaseId, seq }, idempotent: true });
  }

  /** Signals a streamed process's whole group. */
  async killProcess(providerLeaseId: string, processId: string, signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    await this.api.json({ operation: "killProcess", method: "POST", path: ["exec", processId, "kill"], json: { providerLeaseId, signal }, idempotent: true });
  }

  async upload(providerLeaseId: string, path: string, source: Readable, mode: number | undefined, signal?: AbortSignal): Promise<void> {
    await this.api.json({
      operation: "uploadFile",
      method: "PUT",
      path: "/files",
      query: { providerLeaseId, path, ...(mode === undefined ? {} : { mode: mode.toString(8) }) },
      headers: { "content-type": "application/octet-stream" },
      body: Readable.toWeb(source) as ReadableStream<Uint8Array>,
      idempotent: false,
      timeoutMs: 24 * 3_600_000,
      ...(signal ? { signal } : {}),
    });
  }

  async download(providerLeaseId: string, path: string, signal?: AbortSignal): Promise<Readable> {
    const response = await this.api.stream({ operation: "downloadFile", path: "/files", query: { providerLeaseId, path }, idempotent: true, timeoutMs: 24 * 3_600_000, ...(signal ? { signal } : {}) });
    return Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  }
}

/** One client per bridge URL and token (its health answer cached with it). */
export function createClientCache(): (config: CloudflareConfig) => BridgeClient {
  const clients = new Map<string, BridgeClient>();
  return (config) => {
    const key = createHash("sha256")
      .update(JSON.stringify([config.bridgeBaseUrl, config.bridgeAuthToken, config.bridgeRequestTimeoutMs]))
      .digest("hex");
    let client = clients.get(key);
    if (!client) clients.set(key, (client = new BridgeClient(config)));
    return client;
  };
}
