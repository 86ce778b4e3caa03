// The sandbox backend: local bubblewrap jails for the bubblewrap provider and the vendor emulators.
export { createSandboxBackend } from "./backend.js";
export type {
  BackendOptions,
  CreateSandboxOptions,
  EgressSpec,
  ExecExit,
  ExecHandle,
  ExecOptions,
  FileInfo,
  FileScope,
  ListFilter,
  OutputListener,
  OutputRead,
  OutputStreamName,
  OutputSubscription,
  ProcessInfo,
  Sandbox,
  SandboxBackend,
  SandboxFiles,
  SandboxLimits,
  SandboxMount,
  SandboxPaths,
  SandboxState,
  SandboxSummary,
  SandboxUser,
} from "./types.js";
export {
  SandboxError,
  SandboxExecError,
  SandboxExistsError,
  SandboxFileError,
  SandboxGoneError,
  SandboxInputError,
  SandboxStateError,
} from "./errors.js";
export { checkSandboxId, isSandboxId, newSandboxId, SANDBOX_ID_MAX, SANDBOX_ID_RULE } from "./ids.js";
export { MAX_TTL_MS } from "./options.js";
export { captureDisk, restoreDisk, DISK_DIRECTORIES } from "./disk-copy.js";
export { checkSocketPathLength } from "./store/layout.js";
export { ensureStateDir } from "./store/state-dir.js";
export { buildJailArgv, generatedEtcFiles, mountPointProblem, SANDBOX_PATHS, SANDBOX_UID, SANDBOX_GID, SANDBOX_USER, type JailLayout } from "./jail/argv.js";
export { JAIL_FDS } from "./jail/process.js";
export { DEFAULT_JAIL_HOST_UID, dropPrivilegesCommand, resolveJailHostUser, unreachableBy, type HostUser } from "./jail/host-user.js";
export { GUARDED_PID_MAX, SECCOMP_POLICY, seccompArch, type FilteredSyscall } from "./jail/seccomp.js";
export { installPrelude } from "./jail/prelude.js";
export type { ProtectionName, UnenforcedProtection } from "./jail/runtime.js";
export { DEFAULT_SHM_BYTES } from "./sandbox.js";
export { diskLimitProblem } from "./store/disk.js";
export { probeCgroupAccess, type Limits, type LimitName } from "./jail/cgroups.js";
export { SupervisorClient, SupervisorTransportError } from "./supervisor/client.js";
export { defaultSupervisorScript } from "./supervisor/script-path.js";
export { startEgressProxy, type EgressDenial, type EgressProxy } from "./egress/proxy.js";
export { createResolver, parseResolveOverrides, RESOLVE_ENV, type Resolver } from "./egress/resolver.js";
