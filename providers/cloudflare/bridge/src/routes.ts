import type { Env } from "./env.js";
import { CommandRun, parseExecBody } from "./exec.js";
import { absolutePath, downloadFile, parseMode, uploadFile } from "./files.js";
import { assertLeaseLive, onLiveLease } from "./live-lease.js";
import { closeStdin, MAX_STDIN_PART_BYTES, processIdOf, ProcessRun, seqOf, signalProcess, writeStdinPart } from "./process.js";
import { API_PREFIX, BridgeError, bool, int, json, readBody, str } from "./http.js";
import { registryOf } from "./registry.js";
import {
  buildLeaseSandboxId,
  controlExec,
  DEFAULT_CWD,
  DEFAULT_SESSION_ID,
  DEFAULT_SLEEP_AFTER,
  DEFAULT_TIMEOUT_MS,
  destroyQuietly,
  hasSentinel,
  prepareWorkspace,
  sandboxFor,
  writeSentinel,
  type LeaseSettings,
} from "./sandboxes.js";
import { openSse } from "./sse.js";
import { openTerminal } from "./terminal.js";
import { PROCESS_SIGNALS, quote, type ProcessSignal } from "./shell.js";

const BRIDGE_VERSION = "0.2.0";

/**
 * What this bridge adds to upstream's v1 contract. A client finds them in the health answer and
 * uses them only when present, so it also works against a bridge deployed from upstream's template.
 */
const EXTENSIONS = {
  /** `PUT`/`GET /files`: a file's bytes streamed in one request each way. */
  files: true,
  /** `labels` on acquire, `GET /leases?label=k=v`, `GET /leases/{id}`. */
  leaseLabels: true,
  /** `stdinBase64` on exec: binary-safe stdin. */
  stdinBase64: true,
  /** A streamed exec ends at its `timeoutMs` (`timedOut: true`); the SDK's own streamed exec never does. */
  streamDeadline: true,
  /** `expiresAt` on acquire: the bridge destroys the sandbox then (an alarm), whatever keeps it alive. */
  expiry: true,
  /**
   * Streamed processes: `POST /exec` with `streamOutput` and `outputEncoding: "base64"` answers
   * `event: start` `{processId, pid}`, then `stdout`/`stderr` `{base64}` frames as the command writes
   * (binary-safe), then `complete`; `stdinStream: true` takes stdin in parts (`PUT
   * /exec/{processId}/stdin?seq=n`, `POST .../stdin/close`); `POST /exec/{processId}/kill` signals
   * the process group. A process whose client went away is ended.
   */
  streams: true,
  /**
   * `GET /terminal` (a WebSocket): a command on a pseudo-terminal; binary frames are its bytes both
   * ways, `{"type":"resize","cols","rows"}` resizes it, `{"type":"exit","code"}` reports its end.
   */
  terminal: true,
} as const;

const DEFAULT_KEEPALIVE_MS = 15_000;

function settingsOf(body: Record<string, unknown>): LeaseSettings {
  const remoteCwd = str(body.requestedCwd) ?? DEFAULT_CWD;
  if (!remoteCwd.startsWith("/")) throw new BridgeError(400, "invalid_request", "requestedCwd must be an absolute POSIX path.");
  return {
    remoteCwd,
    keepAlive: bool(body.keepAlive),
    sleepAfter: str(body.sleepAfter) ?? DEFAULT_SLEEP_AFTER,
    normalizeId: body.normalizeId !== false,
    sessionStrategy: body.sessionStrategy === "default" ? "default" : "named",
    sessionId: str(body.sessionId) ?? DEFAULT_SESSION_ID,
    timeoutMs: int(body.timeoutMs, DEFAULT_TIMEOUT_MS),
  };
}

function labelsOf(value: unknown): Record<string, string> {
  if (!value || typeof value !== "object" || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter((entry): entry is [string, string] => typeof entry[1] === "string"));
}

const leaseResponse = (providerLeaseId: string, settings: LeaseSettings, resumedLease: boolean, labels?: Record<string, string>) => ({
  providerLeaseId,
  metadata: { provider: "cloudflare", sandboxId: providerLeaseId, ...settings, resumedLease, ...(labels ? { labels } : {}) },
});

type Handler = (request: Request, env: Env, match: RegExpExecArray, ctx: ExecutionContext) => Promise<Response>;

const routes: Array<[string, RegExp, Handler]> = [
  [
    "GET",
    /^\/health$/,
    async () => json(200, { ok: true, provider: "cloudflare", bridgeVersion: BRIDGE_VERSION, capabilities: { reuseLease: true, namedSessions: true, previewUrls: false, extensions: EXTENSIONS } }),
  ],
  [
    "POST",
    /^\/probe$/,
    async (request, env) => {
      const settings = settingsOf(await readBody(request));
      const id = buildLeaseSandboxId({ environmentId: "probe", runId: `probe-${Date.now()}`, reuseLease: false, normalizeId: true });
      const sandbox = sandboxFor(env, id, settings);
      try {
        await sandbox.setKeepAlive(settings.keepAlive);
        await prepareWorkspace(sandbox, settings.remoteCwd);
        const stdout = await controlExec(sandbox, `cd ${quote(settings.remoteCwd)} && pwd`, "Probe the workspace");
        return json(200, {
          ok: true,
          summary: "Connected to Cloudflare sandbox bridge.",
          metadata: { provider: "cloudflare", remoteCwd: settings.remoteCwd, namedSessions: settings.sessionStrategy === "named", stdout },
        });
      } finally {
        await destroyQuietly(sandbox);
      }
    },
  ],
  [
    "POST",
    /^\/leases\/acquire$/,
    async (request, env) => {
      const body = await readBody(request);
      const environmentId = str(body.environmentId);
      const runId = str(body.runId);
      if (!environmentId || !runId) throw new BridgeError(400, "invalid_request", "environmentId and runId are required.");
      const settings = settingsOf(body);
      const reuseLease = bool(body.reuseLease);
      const labels = labelsOf(body.labels);
      const expiresAt = str(body.expiresAt);
      if (expiresAt !== undefined && !Number.isFinite(Date.parse(expiresAt))) throw new BridgeError(400, "invalid_request", "expiresAt must be an ISO timestamp.");
      const id = buildLeaseSandboxId({ environmentId, runId, reuseLease, normalizeId: settings.normalizeId });
      const sandbox = sandboxFor(env, id, settings);
      try {
        await sandbox.setKeepAlive(settings.keepAlive);
        await registryOf(env.LeaseRegistry).put({
          providerLeaseId: id,
          labels,
          createdAt: new Date().toISOString(),
          keepAlive: settings.keepAlive,
          expiresAt: expiresAt ? new Date(expiresAt).toISOString() : null,
        });
        await prepareWorkspace(sandbox, settings.remoteCwd);
        await writeSentinel(sandbox, id, settings, false);
      } catch (error) {
        if (!reuseLease) {
          await destroyQuietly(sandbox);
          await registryOf(env.LeaseRegistry)
            .remove(id)
            .catch(() => undefined);
        }
        throw new BridgeError(500, "acquisition_failed", error instanceof Error ? error.message : String(error), { providerLeaseId: id });
      }
      return json(200, { ...leaseResponse(id, settings, false, labels), expiresAt: expiresAt ? new Date(expiresAt).toISOString() : null });
    },
  ],
  [
    "POST",
    /^\/leases\/resume$/,
    async (request, env) => {
      const body = await readBody(request);
      const id = str(body.providerLeaseId);
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const settings = settingsOf(body);
      const sandbox = sandboxFor(env, id, settings);
      await sandbox.setKeepAlive(settings.keepAlive);
      if (!(await hasSentinel(sandbox, settings.remoteCwd))) throw new BridgeError(409, "sandbox_state_lost", "Cloudflare sandbox state is no longer available.");
      await prepareWorkspace(sandbox, settings.remoteCwd);
      await writeSentinel(sandbox, id, settings, true);
      return json(200, leaseResponse(id, settings, true));
    },
  ],
  [
    "POST",
    /^\/leases\/release$/,
    async (request, env) => {
      const body = await readBody(request);
      const id = str(body.providerLeaseId);
      if (!id || bool(body.reuseLease)) return json(200, { ok: true });
      // Out of the registry first: a late call for this lease then finds it gone instead of booting a container.
      await registryOf(env.LeaseRegistry).remove(id);
      await destroyQuietly(sandboxFor(env, id, { keepAlive: bool(body.keepAlive) }));
      return json(200, { ok: true });
    },
  ],
  [
    "GET",
    /^\/leases$/,
    async (request, env) => {
      const query = new URL(request.url).searchParams;
      const wanted: Record<string, string> = {};
      const asJson = query.get("labels");
      if (asJson !== null) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(asJson);
        } catch {
          throw new BridgeError(400, "invalid_request", "labels must be a JSON object of strings.");
        }
        Object.assign(wanted, labelsOf(parsed));
      }
      for (const pair of query.getAll("label")) {
        const at = pair.indexOf("=");
        if (at <= 0) throw new BridgeError(400, "invalid_request", "label must be key=value.");
        wanted[pair.slice(0, at)] = pair.slice(at + 1);
      }
      return json(200, { leases: await registryOf(env.LeaseRegistry).list(wanted) });
    },
  ],
  [
    "GET",
    /^\/leases\/([^/]+)$/,
    async (_request, env, match) => {
      const record = await registryOf(env.LeaseRegistry).get(decodeURIComponent(match[1]!));
      if (!record) throw new BridgeError(404, "lease_not_found", "This bridge has no such lease.");
      return json(200, record);
    },
  ],
  [
    "DELETE",
    /^\/leases\/([^/]+)$/,
    async (_request, env, match) => {
      const id = decodeURIComponent(match[1]!);
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId path parameter is required.");
      await registryOf(env.LeaseRegistry).remove(id);
      await destroyQuietly(sandboxFor(env, id));
      return json(200, { ok: true });
    },
  ],
  [
    "POST",
    /^\/exec$/,
    async (request, env, _match, ctx) => {
      const spec = parseExecBody(await readBody(request));
      const keepaliveMs = int(env.KEEPALIVE_INTERVAL_MS, DEFAULT_KEEPALIVE_MS);
      if (spec.processMode) {
        // Never a fresh container for a lease that is gone (any call on a destroyed sandbox boots one).
        await assertLeaseLive(env, spec.providerLeaseId);
        const run = new ProcessRun(env, spec);
        const sse = openSse(keepaliveMs);
        // A client that went away ends its process (compatibility flag enable_request_signal); the
        // run is the request's own work, so it outlives the client's connection (waitUntil).
        request.signal?.addEventListener("abort", () => run.abandon(), { once: true });
        ctx.waitUntil(run.run(sse).finally(() => sse.close()));
        return sse.response;
      }
      const run = new CommandRun(env, spec);
      if (!spec.stream) return json(200, await run.run());
      const sse = openSse(keepaliveMs);
      ctx.waitUntil(
        (async () => {
          try {
            const result = await run.run((stream, data) => void sse.send(stream, { data }));
            await sse.send("complete", result);
          } catch (error) {
            await sse.send("error", { error: error instanceof Error ? error.message : String(error) });
          } finally {
            await sse.close();
          }
        })(),
      );
      return sse.response;
    },
  ],
  [
    "PUT",
    /^\/exec\/([^/]+)\/stdin$/,
    async (request, env, match) => {
      const query = new URL(request.url).searchParams;
      const id = str(query.get("providerLeaseId"));
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const processId = processIdOf(match[1]!);
      const seq = seqOf(query.get("seq"));
      const bytes = new Uint8Array(await request.arrayBuffer());
      if (bytes.byteLength > MAX_STDIN_PART_BYTES) throw new BridgeError(413, "payload_too_large", `A stdin part is at most ${MAX_STDIN_PART_BYTES} bytes.`);
      await onLiveLease(env, id, () => writeStdinPart(sandboxFor(env, id), processId, seq, bytes));
      return json(200, { ok: true });
    },
  ],
  [
    "POST",
    /^\/exec\/([^/]+)\/stdin\/close$/,
    async (request, env, match) => {
      const body = await readBody(request);
      const id = str(body.providerLeaseId);
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const processId = processIdOf(match[1]!);
      const seq = seqOf(body.seq);
      await onLiveLease(env, id, () => closeStdin(sandboxFor(env, id), processId, seq));
      return json(200, { ok: true });
    },
  ],
  [
    "POST",
    /^\/exec\/([^/]+)\/kill$/,
    async (request, env, match) => {
      const body = await readBody(request);
      const id = str(body.providerLeaseId);
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const raw = (str(body.signal) ?? "TERM").replace(/^SIG/, "");
      if (!(PROCESS_SIGNALS as readonly string[]).includes(raw)) throw new BridgeError(400, "invalid_request", `signal must be one of ${PROCESS_SIGNALS.join(", ")}.`);
      const processId = processIdOf(match[1]!);
      await onLiveLease(env, id, () => signalProcess(sandboxFor(env, id), processId, raw as ProcessSignal));
      return json(200, { ok: true });
    },
  ],
  ["GET", /^\/terminal$/, (request, env, _match, ctx) => openTerminal(request, env, ctx)],
  [
    "PUT",
    /^\/files$/,
    async (request, env) => {
      const query = new URL(request.url).searchParams;
      const id = str(query.get("providerLeaseId"));
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const path = absolutePath(query.get("path"));
      const mode = parseMode(query.get("mode"));
      const bytes = await onLiveLease(env, id, () => uploadFile(sandboxFor(env, id), path, request.body, mode));
      return json(200, { ok: true, bytes });
    },
  ],
  [
    "GET",
    /^\/files$/,
    async (request, env) => {
      const query = new URL(request.url).searchParams;
      const id = str(query.get("providerLeaseId"));
      if (!id) throw new BridgeError(400, "invalid_request", "providerLeaseId is required.");
      const path = absolutePath(query.get("path"));
      const body = await onLiveLease(env, id, () => downloadFile(sandboxFor(env, id), path));
      return new Response(body, { status: 200, headers: { "content-type": "application/octet-stream" } });
    },
  ],
];

export async function route(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const url = new URL(request.url);
  const path = url.pathname.replace(/\/+$/, "");
  if (path.startsWith(API_PREFIX)) {
    const rest = path.slice(API_PREFIX.length);
    for (const [method, pattern, handler] of routes) {
      const match = pattern.exec(rest);
      if (match && method === request.method) return handler(request, env, match, ctx);
    }
  }
  throw new BridgeError(404, "not_found", `No bridge route matched ${request.method} ${path || "/"}.`);
}
