export { LeaseRuntime, LeaseGoneError, type LiveLease, type RuntimeDeps, type JailSettings } from "./runtime.js";
export { buildJailArgv, generatedEtcFiles, SANDBOX_PATHS, SANDBOX_UID, SANDBOX_GID, SANDBOX_USER, type JailLayout } from "./jail/argv.js";
export { probeCgroupAccess, type Limits, type LimitName } from "./jail/cgroups.js";
export { SupervisorClient, SupervisorTransportError } from "./supervisor/client.js";
export { defaultSupervisorScript } from "./supervisor/script-path.js";
export { startEgressProxy, type EgressDenial, type EgressProxy } from "./egress/proxy.js";
export { createResolver, parseResolveOverrides, RESOLVE_ENV, type Resolver } from "./egress/resolver.js";
export {
  checkSocketPathLength,
  createLeaseDirs,
  defaultStateDir,
  ensureStateDir,
  findOrphans,
  isLeaseId,
  leasePaths,
  listLeases,
  newLeaseId,
  removeTree,
  writeLeaseRecord,
  type LeasePaths,
  type LeaseRecord,
  type LeaseSummary,
} from "./store/lease-store.js";
export { reapLease } from "./reap.js";
