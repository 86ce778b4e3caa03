import type { Image, Sandbox } from "modal";
import { pollUntil, type PollClock, type SandboxHandle } from "@paperclip-sandbox/kit";
import { isGone, type ModalAccount } from "./client.js";
import { allowlistOf, type ModalConfig } from "./config.js";
import { modalLeaseIds, type ModalLeaseRef } from "./lease-id.js";

/** Tags the provider keeps on a sandbox besides the lease labels. */
export const TAGS = {
  /** When the sandbox's timeout ends it (epoch seconds): a fresh worker reads the lease's expiry here. */
  expiresAt: "paperclip-expires-at",
  /** The sandbox name of a lease kept by snapshots (so a listing can name the lease). */
  leaseName: "paperclip-lease-name",
  /** The filesystem snapshot a released lease resumes from. */
  snapshot: "paperclip-snapshot",
  /** The snapshot the running sandbox started from (deleted once a newer one exists). */
  snapshotBase: "paperclip-snapshot-base",
} as const;

/**
 * The sandbox's end may trail the create call by its round trip: the reported expiry leaves this
 * much room so the sandbox never outlives what the lease says (or the host's requested deadline).
 */
const EXPIRY_MARGIN_MS = 2_000;
/** A resume's new sandbox may find its name still held by the one just ended: tried again 1 s apart for this long (5 tries when each answers at once). */
const NAME_TAKEN_WAIT_MS = 4_000;

export interface ModalHandle extends SandboxHandle {
  readonly account: ModalAccount;
  readonly ref: ModalLeaseRef;
  /** The lease's current sandbox (running, or for a stopped lease the last one, ended). */
  readonly sandbox: Sandbox;
  /** The sandbox's tags: the lease labels plus the provider's own (TAGS). */
  readonly labels: Readonly<Record<string, string>>;
  /** For a stopped lease: the snapshot image its next sandbox starts from. */
  readonly snapshotImageId?: string;
}

export function handleOf(account: ModalAccount, ref: ModalLeaseRef, sandbox: Sandbox, tags: Record<string, string>, state: "running" | "stopped" = "running"): ModalHandle {
  const expires = Number(tags[TAGS.expiresAt]);
  return {
    providerLeaseId: modalLeaseIds.encode(ref),
    account,
    ref,
    sandbox,
    labels: tags,
    state,
    // A stopped lease has no running sandbox to end: the next one gets a fresh timeout.
    expiresAt: state === "stopped" ? null : Number.isFinite(expires) && expires > 0 ? new Date(expires * 1000) : null,
    ...(state === "stopped" && tags[TAGS.snapshot] ? { snapshotImageId: tags[TAGS.snapshot] } : {}),
  };
}

export interface CreateOptions {
  image: Image;
  /** The lease labels (provider, company, environment, run) and any provider tags to keep. */
  tags: Record<string, string>;
  /** The provider must end the sandbox at or before this; null: the config's sandbox timeout. */
  expiresAt: Date | null;
  /** A sandbox name (leases kept by snapshots). */
  name?: string;
  /** Injected in tests: the clock of the wait for a taken name. */
  clock?: PollClock;
}

/** Creates a sandbox whose timeout ends it at or before `expiresAt`; its tags say when. */
export async function createSandbox(account: ModalAccount, config: ModalConfig, options: CreateOptions): Promise<{ sandbox: Sandbox; tags: Record<string, string> }> {
  const app = await account.app(config.appName);
  const now = Date.now();
  const room = options.expiresAt ? options.expiresAt.getTime() - now - EXPIRY_MARGIN_MS : config.sandboxTimeoutMs;
  const seconds = Math.max(1, Math.floor(Math.min(config.sandboxTimeoutMs, room) / 1000));
  const tags = { ...options.tags, [TAGS.expiresAt]: String(Math.floor((now + EXPIRY_MARGIN_MS + seconds * 1000) / 1000)) };
  const allowlist = allowlistOf(config);
  const params = {
    timeoutMs: seconds * 1000,
    ...(config.idleTimeoutMs ? { idleTimeoutMs: config.idleTimeoutMs } : {}),
    workdir: config.workdir,
    tags,
    ...(options.name ? { name: options.name } : {}),
    ...(config.blockNetwork ? { blockNetwork: true } : {}),
    ...(allowlist.length > 0 ? { outboundCidrAllowlist: allowlist } : {}),
  };
  const create = () => account.call("createSandbox", () => account.client.sandboxes.create(app, options.image, params), { idempotent: false });
  if (!options.name) return { sandbox: await create(), tags };
  // A taken name is read as "not yet" (the refusal, for the timeout's report); any other failure ends the wait.
  const made = await pollUntil(
    () => create().catch((error: unknown) => (isNameTaken(error) ? (error as Error) : Promise.reject(error))),
    (made) => !(made instanceof Error),
    { what: `modal sandbox name ${options.name} to be free`, timeoutMs: NAME_TAKEN_WAIT_MS, intervalMs: 1_000, maxIntervalMs: 1_000, describe: (taken) => (taken as Error).message, ...options.clock },
  );
  return { sandbox: made as Sandbox, tags };
}

const isNameTaken = (error: unknown) => (error as { code?: unknown }).code === "AlreadyExistsError" || (error as { name?: unknown }).name === "AlreadyExistsError";

/** The sandbox's tags and whether it still runs; null when Modal no longer knows it. */
export async function inspect(account: ModalAccount, sandbox: Sandbox): Promise<{ running: boolean; tags: Record<string, string> } | null> {
  try {
    const exit = await account.call("pollSandbox", () => sandbox.poll(), { idempotent: true });
    const tags = await account.call("getTags", () => sandbox.getTags(), { idempotent: true });
    return { running: exit === null, tags };
  } catch (error) {
    if (isGone(error)) return null;
    throw error;
  }
}

/** Ends a sandbox and waits until Modal confirms it has finished; a gone sandbox is success. */
export async function terminate(account: ModalAccount, sandbox: Sandbox): Promise<void> {
  try {
    await account.call("terminateSandbox", () => sandbox.terminate(), { idempotent: true });
    await account.call("waitSandbox", () => sandbox.wait(), { idempotent: true });
  } catch (error) {
    if (!isGone(error)) throw error;
  } finally {
    sandbox.detach();
  }
}

/** Deletes a snapshot image; one that is already gone is fine. */
export async function deleteImage(account: ModalAccount, imageId: string | undefined): Promise<void> {
  if (!imageId) return;
  try {
    await account.call("deleteImage", () => account.client.images.delete(imageId), { idempotent: true });
  } catch (error) {
    if (!isGone(error)) throw error;
  }
}

/** Running sandboxes of the config's app carrying all `labels`, with their tags and lease ids. */
export async function sandboxesLabelled(
  account: ModalAccount,
  config: Pick<ModalConfig, "appName">,
  labels: Record<string, string>,
): Promise<Array<{ id: string; sandboxId: string; tags: Record<string, string> }>> {
  let app;
  try {
    app = await account.app(config.appName, { create: false });
  } catch (error) {
    if (isGone(error)) return [];
    throw error;
  }
  const found: Array<{ id: string; sandboxId: string; tags: Record<string, string> }> = [];
  const sandboxes = await account.call(
    "listSandboxes",
    async () => {
      const all = [];
      for await (const sandbox of account.client.sandboxes.list({ appId: app.appId, tags: labels })) all.push(sandbox);
      return all;
    },
    { idempotent: true },
  );
  for (const sandbox of sandboxes) {
    const tags = await account.call("getTags", () => sandbox.getTags(), { idempotent: true }).catch(() => null);
    if (!tags) continue;
    const name = tags[TAGS.leaseName];
    found.push({ id: modalLeaseIds.encode(name ? { kind: "named", name } : { kind: "sandbox", sandboxId: sandbox.sandboxId }), sandboxId: sandbox.sandboxId, tags });
  }
  return found;
}
