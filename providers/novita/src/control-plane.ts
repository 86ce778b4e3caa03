import { Sandbox } from "novita-sandbox";
import { envdCall, resolveSecretRef, type EnvdControlPlane, type EnvdListedSandbox, type EnvdSandboxLike } from "@paperclip-sandbox/kit";
import { NOVITA_API_KEY_ENV, type NovitaConfig } from "./config.js";
import { guardedCall, type SdkLogger } from "./empty-body-guard.js";

export interface NovitaConnection {
  apiKey?: string;
  domain?: string;
  apiUrl?: string;
  sandboxUrl?: string;
  requestTimeoutMs: number;
  debug: false;
  secure: boolean;
  autoPause: boolean;
}

/** SDK options for a config: the key (or NOVITA_API_KEY from `env`), the domain and its URL overrides. */
export function novitaConnection(config: NovitaConfig, env: NodeJS.ProcessEnv): NovitaConnection {
  const apiKey = resolveSecretRef(config.apiKey, NOVITA_API_KEY_ENV, env);
  return {
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(config.domain ? { domain: config.domain } : {}),
    ...(config.apiUrl ? { apiUrl: config.apiUrl } : {}),
    ...(config.sandboxUrl ? { sandboxUrl: config.sandboxUrl } : {}),
    requestTimeoutMs: config.requestTimeoutMs,
    debug: false,
    secure: config.secure,
    autoPause: config.autoPause,
  };
}

/** The SDK's connection options (no sandbox options). */
const opts = (conn: NovitaConnection, logger: SdkLogger | undefined) => ({
  ...(conn.apiKey !== undefined ? { apiKey: conn.apiKey } : {}),
  ...(conn.domain !== undefined ? { domain: conn.domain } : {}),
  ...(conn.apiUrl !== undefined ? { apiUrl: conn.apiUrl } : {}),
  ...(conn.sandboxUrl !== undefined ? { sandboxUrl: conn.sandboxUrl } : {}),
  requestTimeoutMs: conn.requestTimeoutMs,
  debug: false,
  ...(logger ? { logger } : {}),
});

const call = <T>(operation: string, idempotent: boolean, fn: () => Promise<T>) => envdCall({ vendor: "novita", operation, idempotent, notFoundMeansGone: true }, fn);

/**
 * Novita's control plane through `novita-sandbox`'s static calls (its non-legacy routes: v1 create and
 * connect, v2 list). Every call goes through the empty-body guard: an error status is never taken
 * for success. "Not found" (404) is gone: `info` answers null, `kill` succeeds.
 */
export const novitaControlPlane: EnvdControlPlane<NovitaConnection> = {
  create: (conn, input) =>
    call("createSandbox", false, async () => {
      const { value } = await guardedCall({ operation: "createSandbox", recordStatus: false }, (logger) =>
        Sandbox.create(input.template, {
          ...opts(conn, logger),
          timeoutMs: input.timeoutMs,
          metadata: input.metadata,
          secure: conn.secure,
          lifecycle: { onTimeout: conn.autoPause ? "pause" : "kill" },
        }),
      );
      return value as unknown as EnvdSandboxLike;
    }),

  info: (conn, sandboxId) =>
    call("getSandbox", true, async () => {
      try {
        const { value, acceptedStatus } = await guardedCall({ operation: "getSandbox", accept: [404] }, (logger) => Sandbox.getInfo(sandboxId, opts(conn, logger)));
        if (acceptedStatus === 404) return null;
        return { state: value.state, metadata: value.metadata ?? {}, startedAt: value.startedAt, endAt: value.endAt };
      } catch (error) {
        if (isNotFound(error)) return null;
        throw error;
      }
    }),

  connect: (conn, sandboxId, timeoutMs) =>
    call("connectSandbox", true, async () => {
      const { value } = await guardedCall({ operation: "connectSandbox", recordStatus: false }, (logger) => Sandbox.connect(sandboxId, { ...opts(conn, logger), timeoutMs }));
      return value as unknown as EnvdSandboxLike;
    }),

  setTimeout: (conn, sandboxId, timeoutMs) =>
    call("setTimeout", true, async () => void (await guardedCall({ operation: "setTimeout" }, (logger) => Sandbox.setTimeout(sandboxId, timeoutMs, opts(conn, logger))))),

  // 409: already paused, which is paused.
  pause: (conn, sandboxId) => call("pauseSandbox", true, async () => void (await guardedCall({ operation: "pauseSandbox", accept: [409] }, (logger) => Sandbox.pause(sandboxId, opts(conn, logger))))),

  kill: (conn, sandboxId) =>
    call("killSandbox", true, async () => {
      try {
        await guardedCall({ operation: "killSandbox", accept: [404] }, (logger) => Sandbox.kill(sandboxId, opts(conn, logger)));
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }),

  list: (conn, metadata) =>
    call("listSandboxes", true, async () => {
      const found: EnvdListedSandbox[] = [];
      const { value } = await guardedCall({ operation: "listSandboxes" }, async (logger) => {
        const paginator = Sandbox.list({ ...opts(conn, logger), query: { metadata, state: ["running", "paused"] }, limit: 100 });
        while (paginator.hasNext) {
          for (const s of await paginator.nextItems()) found.push({ sandboxId: s.sandboxId, state: s.state, metadata: s.metadata ?? {}, startedAt: s.startedAt, endAt: s.endAt });
        }
        return found;
      });
      return value;
    }),
};

/** Novita says "not found" in its messages and 404 in its status: either means gone. */
function isNotFound(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return error.name === "SandboxNotFoundError" || error.name === "NotFoundError" || /^404: /.test(error.message) || /\bnot found\b/i.test(error.message);
}
