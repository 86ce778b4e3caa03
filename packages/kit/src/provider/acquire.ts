import type { PluginEnvironmentAcquireLeaseParams } from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import { mergeEgressGrants, normalizeEgressGrant, type EgressGrant } from "../egress/grant.js";
import { CreationCleanupError } from "../lease/creation-cleanup-error.js";
import { resolveLeaseExpiry } from "../lease/expiry.js";
import { leaseFingerprint } from "../lease/fingerprint.js";
import { leaseLabels, type LeaseLabels } from "../lease/labels.js";
import { closeCommandChannel } from "../transports/command-channel/index.js";
import { AcquireBudgetError, StartBudgetError } from "./errors.js";
import type { LeaseRef, SandboxHandle, SandboxProviderDefinition } from "./types.js";

/** Margin kept between the acquire budget and the host's own deadline, to answer in time. */
const HOST_REPLY_MARGIN_MS = 5_000;
/** The host gives lifecycle calls the config's `timeoutMs` plus this (paperclip-providers.md §1.1). */
const HOST_OVERHEAD_MS = 30_000;

/**
 * How long the host waits for a lifecycle call (acquire, release, ...). The host reads `timeoutMs`
 * from the environment's saved config itself (a host-owned key, like `reuseLease`, whatever the
 * provider's own schema makes of it) and adds 30 s; without one, 30 s.
 */
export function hostCallDeadlineMs(rawConfig: unknown): number {
  const timeoutMs = (rawConfig as { timeoutMs?: unknown } | null)?.timeoutMs;
  return (typeof timeoutMs === "number" && timeoutMs > 0 ? timeoutMs : 0) + HOST_OVERHEAD_MS;
}
/** Destroy attempts for a half-made sandbox (0.5 s, 1 s, 2 s, 4 s apart). */
const CLEANUP_ATTEMPTS = 5;
/** How long a late create is waited for, so what it made can be destroyed. */
const LATE_CREATE_WAIT_MS = 10 * 60_000;

export interface AcquirePlan {
  expiresAt: Date | null;
  reusable: boolean;
  labels: LeaseLabels;
  fingerprint: string;
  shapeFingerprint: string;
  grant: EgressGrant | undefined;
  budgetMs: number;
}

/** Identity of the sandbox's shape alone: recomputable at resume, which has no agent or run params. */
export function shapeFingerprintOf(companyId: string, environmentId: string, shape: Record<string, unknown>): string {
  return leaseFingerprint({ companyId, environmentId, resource: shape });
}

export function planAcquire<S extends z.ZodObject, H extends SandboxHandle>(def: SandboxProviderDefinition<S, H>, config: z.output<S>, params: PluginEnvironmentAcquireLeaseParams): AcquirePlan {
  const shape = def.shape(config);
  const { expiresAt } = resolveLeaseExpiry({ requestedExpiresAt: params.requestedExpiresAt, defaultTtlMs: def.options?.ttlMs?.(config) ?? null });
  // A lease can only be matched to a later run that names the same agent and execution workspace.
  const reusable = (def.keep?.reusable(config) ?? false) && Boolean(params.agentId) && Boolean(params.executionWorkspaceId);
  return {
    expiresAt,
    reusable,
    labels: leaseLabels({ driverKey: params.driverKey || def.driverKey, companyId: params.companyId, environmentId: params.environmentId, runId: params.runId }),
    fingerprint: leaseFingerprint({ ...params, resource: shape }),
    shapeFingerprint: shapeFingerprintOf(params.companyId, params.environmentId, shape),
    grant: def.egress ? mergeEgressGrants(def.egress(config), normalizeEgressGrant(params.executionWorkspaceSettings)) : undefined,
    budgetMs: lifecycleBudgetMs(def, config, params.config),
  };
}

/**
 * How long a lifecycle call may wait on the vendor (an acquire, a resume's start): the provider's
 * `acquireBudgetMs`, else the host's deadline for the call minus a margin to answer in time.
 */
export function lifecycleBudgetMs<S extends z.ZodObject, H extends SandboxHandle>(def: SandboxProviderDefinition<S, H>, config: z.output<S>, rawConfig: unknown): number {
  return def.options?.acquireBudgetMs?.(config) ?? Math.max(5_000, hostCallDeadlineMs(rawConfig) - HOST_REPLY_MARGIN_MS);
}

/**
 * `def.start` within a budget. Past it, the signal given to `start` ends the provider's waiting and
 * the caller gets a StartBudgetError naming the sandbox, before the host's own deadline: the host
 * learns why, and the worker does not go on polling a sandbox nobody waits for. The vendor may still
 * finish starting it; the next resume finds it running, and release or destroy ends it.
 */
export async function startWithinBudget<C, H extends SandboxHandle>(
  driverKey: string,
  start: (handle: H, ref: LeaseRef<C>, signal: AbortSignal) => Promise<H>,
  handle: H,
  ref: LeaseRef<C>,
  budgetMs: number,
): Promise<H> {
  const budget = new AbortController();
  const timer = setTimeout(
    () => budget.abort(new StartBudgetError(`${driverKey} sandbox ${handle.providerLeaseId} did not start within ${budgetMs} ms (it was ${handle.state ?? "not running"})`)),
    budgetMs,
  );
  const starting = start(handle, ref, budget.signal);
  // Once the budget has answered, a late failure of the abandoned start has nobody to tell.
  starting.catch(() => undefined);
  try {
    return await Promise.race([starting, rejectOnAbort(budget.signal)]);
  } catch (error) {
    // A start that gave up because its signal aborted failed for the budget's reason.
    throw budget.signal.aborted ? budget.signal.reason : error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `create`, then `prepare` (the workspace, the sentinel), within the budget. Whatever the provider
 * reported as created (`created(id)`) is destroyed when either fails; a create still running when
 * the budget ends is left to finish in the background and what it made is destroyed then; when
 * create failed before naming anything and the provider can list, the run's label finds what a lost
 * response hid. These are resources this acquire made, so no ownership check applies.
 */
export async function createWithinBudget<S extends z.ZodObject, H extends SandboxHandle>(
  def: SandboxProviderDefinition<S, H>,
  config: z.output<S>,
  params: PluginEnvironmentAcquireLeaseParams,
  plan: AcquirePlan,
  log: (message: string) => void,
  prepare: (handle: H, signal: AbortSignal) => Promise<void> = async () => undefined,
): Promise<H> {
  const budget = new AbortController();
  const timer = setTimeout(() => budget.abort(new AcquireBudgetError(`acquire did not finish within ${plan.budgetMs} ms`)), plan.budgetMs);
  const created = new Set<string>();
  const made = def.create({
    config,
    params,
    labels: plan.labels,
    expiresAt: plan.expiresAt,
    fingerprint: plan.fingerprint,
    reusable: plan.reusable,
    grant: plan.grant,
    signal: budget.signal,
    created: (id) => created.add(id),
  });
  const creating = made.then(async (handle) => {
    created.add(handle.providerLeaseId);
    await prepare(handle, budget.signal);
    return handle;
  });
  const refFor = (providerLeaseId: string): LeaseRef<z.output<S>> => ({ providerLeaseId, config, metadata: {}, companyId: params.companyId, environmentId: params.environmentId });
  try {
    return await Promise.race([creating, rejectOnAbort(budget.signal)]);
  } catch (error) {
    const cleanup = cleanUpFailedCreate(def, config, plan, made, created, refFor);
    if (budget.signal.aborted) {
      // The host is about to give up on this call: answer now, finish the clean-up in the background.
      void cleanup.catch((problem: unknown) => log(`clean-up after an acquire past its budget failed: ${(problem as Error).message}`));
      throw new AcquireBudgetError(`acquire did not finish within ${plan.budgetMs} ms; anything it created is being destroyed`);
    }
    await cleanup.catch((problem: unknown) => {
      if (problem instanceof CreationCleanupError) throw problem;
    });
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

async function cleanUpFailedCreate<S extends z.ZodObject, H extends SandboxHandle>(
  def: SandboxProviderDefinition<S, H>,
  config: z.output<S>,
  plan: AcquirePlan,
  creating: Promise<H>,
  created: Set<string>,
  refFor: (id: string) => LeaseRef<z.output<S>>,
): Promise<void> {
  const late = await Promise.race([
    creating.then(
      (handle) => handle,
      () => undefined,
    ),
    sleep(LATE_CREATE_WAIT_MS).then(() => undefined),
  ]);
  if (late) created.add(late.providerLeaseId);
  if (created.size === 0 && def.list) {
    const found = await def.list(config, { "paperclip-provider": plan.labels["paperclip-provider"], "paperclip-run": plan.labels["paperclip-run"] }, {}).catch(() => []);
    for (const resource of found) created.add(resource.providerLeaseId);
  }
  for (const id of created) await destroyConfirmed(def, refFor(id), late?.providerLeaseId === id ? late : undefined, plan);
}

/**
 * Destroys a resource this acquire (or probe) made, with retries (looked up first when only its id
 * is known; gone is success); throws CreationCleanupError (naming the resource) when it cannot be
 * confirmed.
 */
export async function destroyConfirmed<S extends z.ZodObject, H extends SandboxHandle>(
  def: SandboxProviderDefinition<S, H>,
  ref: LeaseRef<z.output<S>>,
  handle: H | undefined,
  plan: Pick<AcquirePlan, "labels">,
): Promise<void> {
  // A command channel the failed acquire started (its workspace step ran through the runner) goes first.
  await closeCommandChannel(ref.providerLeaseId);
  let last: unknown;
  for (let attempt = 0; attempt < CLEANUP_ATTEMPTS; attempt += 1) {
    if (attempt > 0) await sleep(500 * 2 ** (attempt - 1));
    try {
      const found = handle ?? (await def.get(ref));
      if (found) await def.destroy(ref, found);
      return;
    } catch (error) {
      last = error;
    }
  }
  throw new CreationCleanupError({ providerLeaseId: ref.providerLeaseId, companyId: ref.companyId, environmentId: ref.environmentId, runId: plan.labels["paperclip-run"], labels: plan.labels }, last);
}

function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
