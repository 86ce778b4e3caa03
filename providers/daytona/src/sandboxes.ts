import type { CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams, Sandbox } from "@daytonaio/sdk";
import { createIdempotently, pollUntil, type AsyncMemo, type ListedResource, type PollClock, type SandboxHandle } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import type { DaytonaConfig } from "./config.js";

/** A label only this create carries, so a create whose answer was lost can be found again. */
const CREATE_LABEL = "paperclip-create";
/** Seconds the SDK may wait for a sandbox to reach a state (create, start, stop, delete). */
const STATE_TIMEOUT_SEC = 120;
type CreateParams = CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams;

export interface DaytonaHandle extends SandboxHandle {
  sandbox: Sandbox;
  /** The live-output session, made on first use (sessions end when the sandbox stops). */
  session?: AsyncMemo<string>;
}

/** Gone (null: being deleted), running, unusable ("ended": failed), or anything `startSandbox` can bring back ("stopped"). */
export function stateOf(sandbox: Sandbox): "running" | "stopped" | "ended" | null {
  if (sandbox.state === "started") return "running";
  if (sandbox.state === "destroyed" || sandbox.state === "destroying") return null;
  return sandbox.state === "error" || sandbox.state === "build_failed" ? "ended" : "stopped";
}

export function handleOf(sandbox: Sandbox): DaytonaHandle {
  const expiresAt = sandbox.autoDestroyAt ? new Date(sandbox.autoDestroyAt) : null;
  return { providerLeaseId: sandbox.id, sandbox, labels: { ...sandbox.labels }, state: stateOf(sandbox) ?? "ended", expiresAt };
}

/** Snapshot or image (with its resources), labels, the lifecycle intervals, and a TTL ending at or before `expiresAt`. */
export function createParams(config: DaytonaConfig, labels: Record<string, string>, expiresAt: Date | null): CreateParams {
  // Whole minutes, rounded down: a TTL under a minute cannot be asked for (the lease then has no expiry).
  const ttlMinutes = expiresAt ? Math.floor((expiresAt.getTime() - Date.now() - 5_000) / 60_000) : 0;
  const common = {
    labels,
    envVars: {},
    autoStopInterval: config.autoStopInterval,
    autoArchiveInterval: config.autoArchiveInterval,
    autoDeleteInterval: config.autoDeleteInterval,
    ...(ttlMinutes >= 1 ? { ttlMinutes } : {}),
  };
  if (config.image === undefined) return { ...common, ...(config.snapshot === undefined ? {} : { snapshot: config.snapshot }) };
  const resources = Object.fromEntries(Object.entries({ cpu: config.cpu, memory: config.memory, disk: config.disk, gpu: config.gpu }).filter(([, value]) => value !== undefined));
  return { ...common, image: config.image, ...(Object.keys(resources).length > 0 ? { resources } : {}) };
}

/** Creates the sandbox, retried once without ever making two (a lost answer is found by its create label). */
export function createSandbox(client: DaytonaClient, params: CreateParams, signal: AbortSignal): Promise<Sandbox> {
  return createIdempotently({
    create: (nonce) => client.sdk.create({ ...params, labels: { ...params.labels, [CREATE_LABEL]: nonce } }, { timeout: STATE_TIMEOUT_SEC }),
    find: async (nonce) => {
      const [made] = await findByLabels(client, { [CREATE_LABEL]: nonce });
      if (made) await client.call("waitUntilStarted", () => made.waitUntilStarted(STATE_TIMEOUT_SEC), { idempotent: true, safeMethod: true, signal });
      return made;
    },
    toError: (error) => client.error(error, "createSandbox"),
    signal,
  });
}

export function findByLabels(client: DaytonaClient, labels: Record<string, string>): Promise<Sandbox[]> {
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
  return { providerLeaseId: sandbox.id, labels: { ...sandbox.labels }, createdAt: sandbox.createdAt, expiresAt: sandbox.autoDestroyAt ?? null, state: sandbox.state };
}

/** The sandbox, or null when Daytona no longer has it. */
export async function getSandbox(client: DaytonaClient, id: string): Promise<Sandbox | null> {
  return client.call("getSandbox", () => client.sdk.get(id), { idempotent: true, safeMethod: true }).catch(unlessGone(null));
}

/** Deletes and waits until Daytona reports it destroyed (already gone is success). */
export async function deleteSandbox(client: DaytonaClient, sandbox: Sandbox): Promise<void> {
  await client.call("deleteSandbox", () => sandbox.delete(STATE_TIMEOUT_SEC, true), { idempotent: true, safeMethod: true }).catch(unlessGone(undefined));
}

/** Stops and waits for `stopped`; a sandbox that stopped (or archived) on its own already is fine. */
export async function stopSandbox(client: DaytonaClient, sandbox: Sandbox): Promise<void> {
  try {
    await client.call("stopSandbox", () => sandbox.stop(STATE_TIMEOUT_SEC), { idempotent: true });
  } catch (error) {
    await refresh(client, sandbox);
    if (sandbox.state !== "stopped" && sandbox.state !== "archived") throw error;
  }
}

const BECOMING_STARTED = new Set(["creating", "starting", "restoring", "pending_build", "building_snapshot", "pulling_snapshot", "resuming"]);
const SETTLING = new Set(["stopping", "archiving", "pausing", "resizing", "snapshotting", "forking"]);

/** Brings a sandbox to `started`: waits out a transition, starts a stopped one, restores an archived one. */
export async function startSandbox(client: DaytonaClient, sandbox: Sandbox, clock: PollClock = {}): Promise<void> {
  const state = await pollUntil(
    () => refresh(client, sandbox).then(() => sandbox.state ?? "unknown"),
    (seen) => !SETTLING.has(seen),
    { what: `daytona sandbox ${sandbox.id} to settle before it is started`, timeoutMs: STATE_TIMEOUT_SEC * 1000, intervalMs: 250, describe: (seen) => `it is ${seen}`, ...clock },
  );
  if (state === "started") return;
  if (["stopped", "archived", "paused"].includes(state)) return client.call("startSandbox", () => sandbox.start(STATE_TIMEOUT_SEC), { idempotent: true });
  if (BECOMING_STARTED.has(state)) return client.call("waitUntilStarted", () => sandbox.waitUntilStarted(STATE_TIMEOUT_SEC), { idempotent: true, safeMethod: true });
  throw new Error(`daytona sandbox ${sandbox.id} cannot be started: it is ${state}`);
}

const refresh = (client: DaytonaClient, sandbox: Sandbox) => client.call("getSandbox", () => sandbox.refreshData(), { idempotent: true, safeMethod: true });

/** Turns a "gone" failure into `value`; anything else is rethrown. */
function unlessGone<T>(value: T): (error: unknown) => T {
  return (error) => {
    if ((error as { gone?: boolean }).gone) return value;
    throw error;
  };
}
