import type { Env } from "./env.js";
import { BridgeError } from "./http.js";
import { registryOf } from "./registry.js";
import { destroyQuietly, sandboxFor } from "./sandboxes.js";

/**
 * Whether the lease is one this bridge still holds (its registry drops a lease before destroying its
 * sandbox). Any call on a destroyed sandbox starts a fresh, empty container (the SDK starts one for
 * every call), so this bridge's own routes check first; upstream's JSON exec does not (upstream's
 * plugin runs it on leases this registry may not hold).
 */
export async function leaseLive(env: Env, providerLeaseId: string): Promise<boolean> {
  return (await registryOf(env.LeaseRegistry).get(providerLeaseId)) !== null;
}

/** 409 `sandbox_state_lost` (upstream's code for a gone sandbox) unless the lease is live. */
export async function assertLeaseLive(env: Env, providerLeaseId: string): Promise<void> {
  if (!(await leaseLive(env, providerLeaseId))) throw new BridgeError(409, "sandbox_state_lost", "Cloudflare sandbox state is no longer available.");
}

/**
 * Runs `work` on a live lease. A destroy that raced it is completed afterwards: the work may have
 * started a fresh container after the destroy, which nobody else would end.
 */
export async function onLiveLease<T>(env: Env, providerLeaseId: string, work: () => Promise<T>): Promise<T> {
  await assertLeaseLive(env, providerLeaseId);
  try {
    return await work();
  } finally {
    await endIfGone(env, providerLeaseId);
  }
}

/** Destroys the lease's sandbox again when the registry no longer has it. */
export async function endIfGone(env: Env, providerLeaseId: string): Promise<void> {
  if (!(await leaseLive(env, providerLeaseId).catch(() => true))) await destroyQuietly(sandboxFor(env, providerLeaseId));
}
