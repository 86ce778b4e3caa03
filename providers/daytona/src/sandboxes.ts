import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams, Sandbox } from "@daytonaio/sdk";
import { retryDelay, type ListedResource, type SandboxHandle } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import type { DaytonaConfig } from "./config.js";

/** A label only this create carries, so a create whose answer was lost can be found again. */
export const CREATE_LABEL = "paperclip-create";
/** Seconds the SDK may wait for a sandbox to reach a state (create, start, stop, delete). */
const STATE_TIMEOUT_SEC = 120;

export interface DaytonaHandle extends SandboxHandle {
  sandbox: Sandbox;
  /** The lease's workspace in the sandbox (absolute). */
  workdir: string;
  /** The live-output session, created on first use (sessions end when the sandbox stops). */
  session?: Promise<string>;
}

type RunningState = NonNullable<SandboxHandle["state"]>;

/** Daytona's states as the lifecycle layer sees them; null when the sandbox is gone or unusable. */
export function stateOf(sandbox: Sandbox): RunningState | null {
  switch (sandbox.state) {
    case "started":
      return "running";
    case "destroyed":
    case "destroying":
    case "error":
    case "build_failed":
      return null;
    default:
      return "stopped"; // stopped, archived, and every transitional state: `startSandbox` waits them out
  }
}

export function handleOf(sandbox: Sandbox, workdir: string): DaytonaHandle {
  return {
    providerLeaseId: sandbox.id,
    sandbox,
    workdir,
    labels: { ...sandbox.labels },
    state: stateOf(sandbox) ?? "stopped",
    expiresAt: sandbox.autoDestroyAt ? new Date(sandbox.autoDestroyAt) : null,
  };
}

/** The create request: snapshot or image (with resources), labels, the lifecycle intervals and the TTL. */
export function createParams(config: DaytonaConfig, labels: Record<string, string>, expiresAt: Date | null): CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams {
  const lifecycle = {
    labels,
    envVars: {},
    autoStopInterval: config.autoStopInterval,
    autoArchiveInterval: config.autoArchiveInterval,
    autoDeleteInterval: config.autoDeleteInterval,
    ...ttl(expiresAt),
  };
  if (config.image === undefined) return { ...lifecycle, ...(config.snapshot === undefined ? {} : { snapshot: config.snapshot }) };
  const resources = { cpu: config.cpu, memory: config.memory, disk: config.disk, gpu: config.gpu };
  const given = Object.fromEntries(Object.entries(resources).filter(([, value]) => value !== undefined));
  return { ...lifecycle, image: config.image, ...(Object.keys(given).length > 0 ? { resources: given } : {}) };
}

/** A wall-clock TTL (whole minutes, rounded down) that ends the sandbox at or before `expiresAt`; none under a minute. */
function ttl(expiresAt: Date | null): { ttlMinutes?: number } {
  if (!expiresAt) return {};
  const minutes = Math.floor((expiresAt.getTime() - Date.now() - 5_000) / 60_000);
  return minutes >= 1 ? { ttlMinutes: minutes } : {};
}

/**
 * Creates the sandbox; a transient failure is tried once more. When the first answer was lost
 * (the create may have happened), the sandbox is looked for by its create label first and adopted
 * if it is there, so a retry never makes a second one.
 */
export async function createSandbox(client: DaytonaClient, params: CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams, signal: AbortSignal): Promise<Sandbox> {
  const nonce = randomBytes(12).toString("hex");
  const request = { ...params, labels: { ...params.labels, [CREATE_LABEL]: nonce } };
  const attempt = () => client.sdk.create(request, { timeout: STATE_TIMEOUT_SEC });
  try {
    return await attempt();
  } catch (raw) {
    const error = client.error(raw, "createSandbox");
    if (!error.retryable || signal.aborted) throw error;
    if (error.mayHaveTakenEffect) {
      const [made] = await findByLabels(client, { [CREATE_LABEL]: nonce }).catch(() => {
        throw error; // cannot tell whether it exists: the lifecycle layer's clean-up looks again
      });
      if (made) {
        await client.call("waitUntilStarted", () => made.waitUntilStarted(STATE_TIMEOUT_SEC), { idempotent: true, signal });
        return made;
      }
    }
    await sleep(retryDelay(1, {}, Math.random, error.retryAfterMs), undefined, { signal });
    try {
      return await attempt();
    } catch (again) {
      throw client.error(again, "createSandbox").with({ attempts: 2 });
    }
  }
}

export async function findByLabels(client: DaytonaClient, labels: Record<string, string>): Promise<Sandbox[]> {
  return client.call(
    "listSandboxes",
    async () => {
      const found: Sandbox[] = [];
      for await (const sandbox of client.sdk.list({ labels, limit: 100 })) found.push(sandbox);
      return found;
    },
    { idempotent: true, safeMethod: true },
  );
}

export function listedResource(sandbox: Sandbox): ListedResource {
  return {
    providerLeaseId: sandbox.id,
    labels: { ...sandbox.labels },
    ...(sandbox.createdAt ? { createdAt: sandbox.createdAt } : {}),
    expiresAt: sandbox.autoDestroyAt ?? null,
    ...(sandbox.state ? { state: sandbox.state } : {}),
  };
}

/** The sandbox, or null when Daytona no longer has it. */
export async function getSandbox(client: DaytonaClient, id: string): Promise<Sandbox | null> {
  try {
    return await client.call("getSandbox", () => client.sdk.get(id), { idempotent: true, safeMethod: true });
  } catch (error) {
    if ((error as { gone?: boolean }).gone) return null;
    throw error;
  }
}

/** Deletes and waits until Daytona reports it destroyed (a sandbox already gone is success). */
export async function deleteSandbox(client: DaytonaClient, sandbox: Sandbox): Promise<void> {
  try {
    await client.call("deleteSandbox", () => sandbox.delete(STATE_TIMEOUT_SEC, true), { idempotent: true, safeMethod: true });
  } catch (error) {
    if (!(error as { gone?: boolean }).gone) throw error;
  }
}

/** Stops and waits for `stopped` (an archived or already stopped sandbox is fine). */
export async function stopSandbox(client: DaytonaClient, sandbox: Sandbox): Promise<void> {
  try {
    await client.call("stopSandbox", () => sandbox.stop(STATE_TIMEOUT_SEC), { idempotent: true });
  } catch (error) {
    // "not in a stoppable state": it may have stopped (or auto-stopped) already.
    await client.call("getSandbox", () => sandbox.refreshData(), { idempotent: true, safeMethod: true });
    if (sandbox.state !== "stopped" && sandbox.state !== "archived") throw error;
  }
}

/** States that end in `started` on their own, and states that must end before a start. */
const BECOMING_STARTED = new Set(["creating", "starting", "restoring", "pending_build", "building_snapshot", "pulling_snapshot", "resuming"]);
const SETTLING = new Set(["stopping", "archiving", "pausing", "resizing", "snapshotting", "forking"]);

/** Brings a sandbox to `started`: waits out a transition, starts a stopped one, restores an archived one. */
export async function startSandbox(client: DaytonaClient, sandbox: Sandbox): Promise<void> {
  const refresh = () => client.call("getSandbox", () => sandbox.refreshData(), { idempotent: true, safeMethod: true });
  const deadline = Date.now() + STATE_TIMEOUT_SEC * 1000;
  await refresh();
  for (;;) {
    const state = sandbox.state ?? "unknown";
    if (state === "started") return;
    if (state === "stopped" || state === "archived" || state === "paused") {
      return client.call("startSandbox", () => sandbox.start(STATE_TIMEOUT_SEC), { idempotent: true });
    }
    if (BECOMING_STARTED.has(state)) return client.call("waitUntilStarted", () => sandbox.waitUntilStarted(STATE_TIMEOUT_SEC), { idempotent: true });
    if (!SETTLING.has(state) || Date.now() > deadline) throw new Error(`daytona sandbox ${sandbox.id} cannot be started: it is ${state}`);
    await sleep(250);
    await refresh();
  }
}
