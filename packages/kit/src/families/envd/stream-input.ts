import http from "node:http";
import https from "node:https";
import { ProviderApiError } from "../../vendor/api-error.js";
import { isRetryableStatus } from "../../vendor/classify.js";
import { connectCodeOf } from "../../vendor/grpc-codes.js";
import { apiErrorFromGrpcStatus } from "../../vendor/grpc-error.js";
import { classifyNetworkError } from "../../vendor/network-error.js";

/**
 * Where the SDK sends envd's Connect calls for one sandbox: its envd base URL and the headers its
 * transport adds (the sandbox routing headers, the envd access token, the user agent).
 */
export interface EnvdRpcEndpoint {
  baseUrl: string;
  headers: Record<string, string>;
}

/** One `process.Process/StreamInput` client stream: a process's stdin as one long request. */
export interface EnvdStreamInput {
  /** Sends one data event; resolves once it is handed to the connection (as a pipe write is). */
  write(chunk: Buffer): Promise<void>;
  /** Ends the stream and waits for envd's answer (every data event processed); rejects with its error. */
  end(): Promise<void>;
  /** Drops the request (the process ended: nothing more is needed). */
  abort(): void;
  /** Settles with envd's answer or the failure, whichever ends the stream first (never rejects). */
  readonly settled: Promise<ProviderApiError | undefined>;
  /** Bytes sent in data events so far. */
  readonly sent: number;
}

const FLAG_END_STREAM = 0x02;
/** Keepalive events while no data goes out, so idle proxies keep the request (envd ignores them). */
const KEEPALIVE_MS = 30_000;

/**
 * Opens envd's client-streaming `StreamInput` for process `pid` over HTTP/1.1 (chunked body; each
 * event is one chunk, flushed as written) or whatever the origin speaks: the start event at once,
 * then a data event per write. The SDKs cannot send it (their Connect transport is the fetch one,
 * which refuses request streams), so this speaks the Connect protocol's JSON codec itself, to the
 * same URL with the same headers. One request carries every later write: no vendor call per write.
 */
export function openEnvdStreamInput(endpoint: EnvdRpcEndpoint, pid: number, options: { vendor: string }): EnvdStreamInput {
  const url = new URL(`${endpoint.baseUrl.replace(/\/+$/, "")}/process.Process/StreamInput`);
  const client = url.protocol === "https:" ? https : http;
  const vendor = options.vendor;
  const request = client.request(url, {
    method: "POST",
    headers: { ...endpoint.headers, "content-type": "application/connect+json", "connect-protocol-version": "1", "transfer-encoding": "chunked" },
  });
  request.setNoDelay?.(true);
  let sent = 0;
  let finished = false;
  let resolveSettled!: (error: ProviderApiError | undefined) => void;
  const settled = new Promise<ProviderApiError | undefined>((resolve) => (resolveSettled = resolve));
  const settle = (error: ProviderApiError | undefined) => {
    if (finished) return;
    finished = true;
    clearInterval(keepalive);
    resolveSettled(error);
  };
  const fail = (code: string, status: number, detail: string, retryable = false) =>
    settle(new ProviderApiError({ vendor, operation: "process.StreamInput", status, code, detail, retryable, gone: false, mayHaveTakenEffect: true }));

  let answered = false;
  request.on("response", (response) => {
    answered = true;
    const chunks: Buffer[] = [];
    response.on("data", (chunk: Buffer) => chunks.push(chunk));
    response.on("error", (error) => fail(classifyNetworkError(error)?.code ?? "unknown", 0, error.message, true));
    response.on("end", () => settle(answerError(vendor, response.statusCode ?? 0, Buffer.concat(chunks))));
    // After "end" this changes nothing; before it, the answer was cut off.
    response.on("close", () => fail("unavailable", 0, "the StreamInput answer was cut off", true));
  });
  request.on("error", (error) => {
    const network = classifyNetworkError(error);
    fail(network?.code ?? "unknown", 0, error.message, network?.retryable ?? false);
  });
  request.on("close", () => {
    if (!answered) fail("unavailable", 0, "the StreamInput request closed without an answer", true);
  });

  const send = (event: object) =>
    new Promise<void>((resolve, reject) => {
      if (finished || request.writableEnded) return reject(new Error("the StreamInput stream has ended"));
      request.write(envelope(event), (error) => (error ? reject(error) : resolve()));
    });
  void send({ start: { process: { pid } } }).catch(() => undefined);
  let lastSend = Date.now();
  const keepalive = setInterval(() => {
    if (Date.now() - lastSend >= KEEPALIVE_MS) void send({ keepalive: {} }).catch(() => undefined);
  }, KEEPALIVE_MS);
  keepalive.unref?.();

  return {
    async write(chunk) {
      lastSend = Date.now();
      await send({ data: { input: { stdin: chunk.toString("base64") } } });
      sent += chunk.length;
    },
    async end() {
      if (!finished && !request.writableEnded) request.end();
      const error = await settled;
      if (error) throw error;
    },
    abort() {
      if (finished) return;
      settle(undefined);
      request.destroy();
    },
    settled,
    get sent() {
      return sent;
    },
  };
}

function envelope(message: object): Buffer {
  const payload = Buffer.from(JSON.stringify(message), "utf8");
  const header = Buffer.alloc(5);
  header.writeUInt8(0, 0);
  header.writeUInt32BE(payload.length, 1);
  return Buffer.concat([header, payload]);
}

/**
 * envd's answer to a client stream: HTTP 200 with the response message and an end-stream message
 * (`{error}` when it failed), or a plain HTTP error (the route is unknown, a proxy refused it).
 */
function answerError(vendor: string, status: number, body: Buffer): ProviderApiError | undefined {
  const make = (code: string, detail: string, httpStatus: number) =>
    new ProviderApiError({
      vendor,
      operation: "process.StreamInput",
      status: httpStatus,
      code,
      detail,
      retryable: isRetryableStatus(httpStatus),
      gone: false,
      mayHaveTakenEffect: code !== "unimplemented",
    });
  if (status !== 200) {
    let detail = body.toString("utf8").slice(0, 300);
    let code: string = status === 404 || status === 415 || status === 501 || status === 411 ? "unimplemented" : status === 502 || status === 503 ? "unavailable" : `http_${status}`;
    try {
      const parsed = JSON.parse(detail) as { code?: unknown; message?: unknown };
      if (typeof parsed.code === "string" && connectCodeOf(parsed.code) === parsed.code) code = parsed.code;
      if (typeof parsed.message === "string") detail = parsed.message;
    } catch {
      // not a Connect error body: keep the text
    }
    return make(code, detail || `HTTP ${status}`, status);
  }
  for (let at = 0; at + 5 <= body.length; ) {
    const flags = body[at]!;
    const length = body.readUInt32BE(at + 1);
    const payload = body.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    if (!(flags & FLAG_END_STREAM)) continue;
    let end: { error?: { code?: string; message?: string } } = {};
    try {
      end = JSON.parse(payload.toString("utf8") || "{}") as typeof end;
    } catch {
      return make("protocol", "the StreamInput end-stream message is not JSON", 200);
    }
    if (!end.error) return undefined;
    const code = end.error.code ?? "unknown";
    // unimplemented: envd read none of the stream (the caller resends through SendInput).
    const failed = apiErrorFromGrpcStatus({ vendor, operation: "process.StreamInput", code, message: end.error.message ?? code, redact: (text) => text, notProcessed: code === "unimplemented" });
    return failed.with({ gone: false });
  }
  return make("protocol", "the StreamInput answer has no end-stream message", 200);
}
