import { Sandbox, type ConnectionOpts } from "e2b";
import { envdCall, resolveSecretRef, type EnvdControlPlane, type EnvdListedSandbox, type EnvdSandboxLike } from "@paperclip-sandbox/kit";
import { E2B_API_KEY_ENV, type E2bConfig } from "./config.js";

/** The SDK's request timeout for one control-plane or envd call. */
export const E2B_REQUEST_TIMEOUT_MS = 60_000;

export type E2bConnection = Pick<ConnectionOpts, "apiKey" | "apiUrl" | "sandboxUrl" | "requestTimeoutMs" | "debug">;

/** SDK options for a config: the key (or E2B_API_KEY from `env`) and the URL overrides; never debug mode. */
export function e2bConnection(config: E2bConfig, env: NodeJS.ProcessEnv): E2bConnection {
  const apiKey = resolveSecretRef(config.apiKey, E2B_API_KEY_ENV, env);
  return {
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(config.apiUrl ? { apiUrl: config.apiUrl } : {}),
    ...(config.sandboxUrl ? { sandboxUrl: config.sandboxUrl } : {}),
    requestTimeoutMs: E2B_REQUEST_TIMEOUT_MS,
    debug: false,
  };
}

const call = <T>(operation: string, idempotent: boolean, fn: () => Promise<T>) => envdCall({ vendor: "e2b", operation, idempotent, notFoundMeansGone: true }, fn);

/**
 * E2B's control plane through the SDK's static calls (no sandbox object is needed to manage one):
 * v2 create and connect, getInfo, setTimeout, pause, kill and the metadata-filtered list.
 */
export const e2bControlPlane: EnvdControlPlane<E2bConnection> = {
  create: (conn, input) =>
    call("createSandbox", false, () => Sandbox.create(input.template, { ...conn, timeoutMs: input.timeoutMs, metadata: input.metadata, signal: input.signal })) as Promise<EnvdSandboxLike>,

  info: (conn, sandboxId) =>
    call("getSandbox", true, async () => {
      try {
        const info = await Sandbox.getInfo(sandboxId, conn);
        return { state: info.state, metadata: info.metadata ?? {}, startedAt: info.startedAt, endAt: info.endAt };
      } catch (error) {
        if ((error as Error).name === "SandboxNotFoundError") return null;
        throw error;
      }
    }),

  connect: (conn, sandboxId, timeoutMs) => call("connectSandbox", true, () => Sandbox.connect(sandboxId, { ...conn, timeoutMs })) as Promise<EnvdSandboxLike>,

  setTimeout: (conn, sandboxId, timeoutMs) => call("setTimeout", true, () => Sandbox.setTimeout(sandboxId, timeoutMs, conn)),

  // false means it was already paused: that is paused too.
  pause: (conn, sandboxId) => call("pauseSandbox", true, async () => void (await Sandbox.pause(sandboxId, conn))),

  // false means it did not exist: gone is what a kill wants.
  kill: (conn, sandboxId) => call("killSandbox", true, async () => void (await Sandbox.kill(sandboxId, conn))),

  // Custom images: E2B snapshot templates, named (the name carries the template's owner).
  snapshots: {
    create: (conn, sandboxId, name) => call("createSnapshot", false, async () => (await Sandbox.createSnapshot(sandboxId, { ...conn, name })).snapshotId),
    exists: (conn, ref) =>
      call("listSnapshots", true, async () => {
        const paginator = Sandbox.listSnapshots({ ...conn, name: ref.replace(/:[^/:]*$/, "").replace(/^.*\//, ""), limit: 100 });
        while (paginator.hasNext) if ((await paginator.nextItems()).some((s) => s.snapshotId === ref || s.names.includes(ref))) return true;
        return false;
      }),
    // false: it was not there, which is what a delete wants.
    delete: (conn, ref) => call("deleteSnapshot", true, async () => void (await Sandbox.deleteSnapshot(ref, conn))),
  },

  list: (conn, metadata) =>
    call("listSandboxes", true, async () => {
      const paginator = Sandbox.list({ ...conn, query: { metadata, state: ["running", "paused"] }, limit: 100 });
      const found: EnvdListedSandbox[] = [];
      while (paginator.hasNext) {
        for (const s of await paginator.nextItems()) found.push({ sandboxId: s.sandboxId, state: s.state, metadata: s.metadata ?? {}, startedAt: s.startedAt, endAt: s.endAt });
      }
      return found;
    }),
};
