// The @kubernetes/client-node glue: one KubeConfig and typed API clients per credential, every call
// made through the kit's retry with errors as ProviderApiError (the Status message kept, the
// credentials never), and pod exec over client-node's WebSocket handler.
import { PassThrough } from "node:stream";
import querystring from "node:querystring";
import { ApiException, ApisApi, BatchV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, NetworkingV1Api, RbacAuthorizationV1Api } from "@kubernetes/client-node";
// Not re-exported from the package root; the raw socket is needed for back-pressured stdin and v5 close.
import { WebSocketHandler } from "@kubernetes/client-node/dist/web-socket-handler.js";
import {
  apiErrorFromFailure,
  classifyNetworkError,
  createClientCache,
  createRedactor,
  createVendorCall,
  isGoneStatus,
  isProviderApiError,
  isRetryableStatus,
  memoAsyncByKey,
  parseRetryAfter,
  ProviderApiError,
  type AsyncMemoByKey,
  type ChannelConnectRequest,
  type ChannelProtocolMemory,
  type ChannelSocket,
} from "@paperclip-sandbox/kit";
import type { KubernetesConfig } from "./config.js";

export interface KubeClients {
  kc: KubeConfig;
  /** host of the API server, for messages. */
  server: string;
  core: CoreV1Api;
  batch: BatchV1Api;
  rbac: RbacAuthorizationV1Api;
  net: NetworkingV1Api;
  custom: CustomObjectsApi;
  apis: ApisApi;
  /** The exec protocol this server negotiated last. */
  execProtocol: ChannelProtocolMemory;
  /** Per-worker memos for this server: agent-sandbox version, tenants already ensured. */
  cache: AsyncMemoByKey<unknown>;
}

/** Clients per credential, kept for the worker's life (a factory's own cache: no module state). */
export function createClientPool() {
  const pool = createClientCache(
    (config: KubernetesConfig) => (config.inCluster ? "" : (config.kubeconfig ?? config.kubeconfigSecretRef ?? "")),
    (config): KubeClients => {
      const source = config.inCluster ? "" : (config.kubeconfig ?? config.kubeconfigSecretRef ?? "");
      const kc = new KubeConfig();
      if (source === "") kc.loadFromCluster();
      else {
        try {
          kc.loadFromString(source);
        } catch (error) {
          throw new Error(`Kubeconfig: not a readable kubeconfig (${(error as Error).message.split("\n")[0]})`);
        }
      }
      const cluster = kc.getCurrentCluster();
      if (!cluster) throw new Error("Kubeconfig: its current context names no cluster");
      return {
        kc,
        server: cluster.server,
        core: kc.makeApiClient(CoreV1Api),
        batch: kc.makeApiClient(BatchV1Api),
        rbac: kc.makeApiClient(RbacAuthorizationV1Api),
        net: kc.makeApiClient(NetworkingV1Api),
        custom: kc.makeApiClient(CustomObjectsApi),
        apis: kc.makeApiClient(ApisApi),
        execProtocol: {},
        cache: memoAsyncByKey(),
      };
    },
  );
  return (config: KubernetesConfig): KubeClients => pool.get(config);
}

interface StatusBody {
  message?: string;
  reason?: string;
  details?: { causes?: Array<{ field?: string; message?: string }>; retryAfterSeconds?: number };
}

/** A client-node failure as the kit's typed error: the Status message and reason, nothing else. */
export function toApiError(error: unknown, operation: string): unknown {
  if (isProviderApiError(error)) return error;
  if (error instanceof ApiException) {
    const status = error.code;
    let body: StatusBody = {};
    try {
      body = typeof error.body === "string" ? JSON.parse(error.body) : ((error.body as StatusBody) ?? {});
    } catch {
      body = { message: String(error.body).slice(0, 300) };
    }
    const retryAfterMs = parseRetryAfter((error.headers as Record<string, string> | undefined)?.["retry-after"]);
    return new ProviderApiError({
      vendor: "kubernetes",
      operation,
      status,
      code: body.reason ?? `http_${status}`,
      detail: body.message ?? `HTTP ${status}`,
      retryable: isRetryableStatus(status),
      gone: isGoneStatus(status),
      // The API server answers 429 before doing anything.
      mayHaveTakenEffect: status !== 429,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }
  // No response at all: the kit's network classification (connect failures are safe to resend).
  const network = apiErrorFromFailure({ vendor: "kubernetes", operation, error, timedOut: false, aborted: false, redact: NO_SECRETS });
  return network.code === "request_failed" ? error : network;
}

/** The API server's network errors carry no credential (the token travels in a header). */
const NO_SECRETS = createRedactor([]);

const kubeCall = createVendorCall({ translate: (error, operation) => toApiError(error, operation), retry: { attempts: 5, totalMs: 60_000, baseDelayMs: 100, maxDelayMs: 2_000 } });

/** One API call with retries (idempotent calls on any transient failure, others only when unprocessed). */
export function call<T>(operation: string, idempotent: boolean, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  return kubeCall(operation, fn, { idempotent, ...(signal ? { signal } : {}) });
}

export const isStatus = (error: unknown, status: number) => isProviderApiError(error) && error.status === status;

/**
 * A failed exec handshake as the kit's typed error. The socket never opened, so the command never
 * started: a refusal (429, 5xx) or a network failure may be tried again.
 */
function execRefused(error: unknown, target: string): ProviderApiError {
  const message = (error as { message?: string })?.message ?? String(error);
  const status = Number(/Unexpected server response: (\d{3})/.exec(message)?.[1] ?? 0);
  const network = status === 0 ? classifyNetworkError(error) : undefined;
  return new ProviderApiError({
    vendor: "kubernetes",
    operation: "execPod",
    status,
    code: "exec_refused",
    detail: `pod exec into ${target} failed: ${message}`,
    retryable: status > 0 ? isRetryableStatus(status) : (network?.retryable ?? false),
    gone: isGoneStatus(status),
    mayHaveTakenEffect: false,
  });
}

const execCall = createVendorCall<{ target: string }>({ translate: (error, _operation, { target }) => execRefused(error, target), retry: { attempts: 4, baseDelayMs: 300, totalMs: 30_000 } });

/** Opens `pods/exec` as a channel WebSocket; a refused handshake (nothing ran) is tried again. */
export function execConnector(clients: KubeClients, namespace: string, pod: string, container: string) {
  // client-node's handler ends its `streams` on a server close frame: give it streams of its own.
  const handler = new WebSocketHandler(clients.kc, undefined, { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough() });
  return async (request: ChannelConnectRequest): Promise<ChannelSocket> => {
    const query = querystring.stringify({ command: request.command, container, stdin: request.stdin, stdout: true, stderr: true, tty: false });
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/exec?${query}`;
    const socket = await execCall(
      "execPod",
      () =>
        handler.connect(path, null, (channel: number, payload: Buffer) => {
          request.onFrame(channel, payload);
          return true;
        }),
      { idempotent: false, target: `${namespace}/${pod}` },
    );
    return socket as unknown as ChannelSocket;
  };
}
