/**
 * Reaping a lease from its directory alone, for the CLI's leak clean-up (`leases gc`): ends its jail
 * (confirmed), removes its cgroups and deletes the directory. Safe to call for a lease that is
 * already half gone.
 */
import { removeCgroups } from "./jail/cgroups.js";
import { stopJail } from "./jail/process.js";
import { defaultStateDir, leasePaths, readLeaseRecord, removeTree } from "./store/lease-store.js";

export async function reapLease(leaseId: string, stateDir: string = defaultStateDir()): Promise<void> {
  const paths = leasePaths(stateDir, leaseId);
  const record = await readLeaseRecord(paths).catch(() => null);
  if (record?.jail) await stopJail(record.jail, record.cgroups);
  if (record) {
    const left = await removeCgroups(record.cgroups);
    if (left.length > 0) throw new Error(`cgroups of lease ${leaseId} could not be removed: ${left.join(", ")}`);
  }
  await removeTree(paths.dir);
}
