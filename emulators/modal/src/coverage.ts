import type { CoverageEntry, CoverageSpec } from "@paperclip-sandbox/emulator-kit";

export const CONTROL_SERVICE = "modal.client.ModalClient";
export const ROUTER_SERVICE = "modal.task_command_router.TaskCommandRouter";

/** The coverage group of a method: the router as one group, the control plane by name family. */
export function groupOf(service: "ModalClient" | "TaskCommandRouter", method: string): string {
  if (service === "TaskCommandRouter") return "TaskCommandRouter";
  const family = method.startsWith("SharedVolume") ? "SharedVolume" : method.startsWith("PersistentSandbox") ? "PersistentSandbox" : (/^[A-Z][a-z]+/.exec(method)?.[0] ?? method);
  return `ModalClient/${family}`;
}

const NO_MEMORY_SNAPSHOTS = "no memory snapshots: a jail's processes cannot be checkpointed and restored (filesystem snapshots are served)";
const NO_SIDECARS = "no sidecar containers: one jail per sandbox";
const NO_NETWORK = "jails have no network: no ports to open, tunnel or allow";
const RUNTIME_ONLY = "called by Modal's container runtime or dashboard, not by clients";
const NO_DIR_IMAGES = "images are names: a directory image cannot be mounted into or cut out of a running jail";

const served = (reason?: string): CoverageEntry => ({ status: "served", ...(reason ? { reason } : {}) });
const refused = (reason: string): CoverageEntry => ({ status: "refused", reason });

const control = (entries: Record<string, CoverageEntry>) => Object.fromEntries(Object.entries(entries).map(([method, entry]) => [`${groupOf("ModalClient", method)}.${method}`, entry]));
const router = (entries: Record<string, CoverageEntry>) => Object.fromEntries(Object.entries(entries).map(([method, entry]) => [`TaskCommandRouter.${method}`, entry]));

/**
 * Every method of the `ModalClient` and `TaskCommandRouter` services the two SDKs bundle (`modal`
 * 0.11.1 and 0.7.6), as the emulator answers it. Refused methods the SDKs can call answer
 * UNIMPLEMENTED `emulator limit: <reason>`; the rest of a refused family answers grpc-js's own
 * UNIMPLEMENTED (and is recorded as unserved).
 */
export const MODAL_COVERAGE: CoverageSpec = {
  operations: {
    ...control({
      AuthTokenGet: served(),
      ClientHello: refused("a Python-client handshake the JS SDKs never send"),
      AppGetOrCreate: served("lookup, create-if-missing, ephemeral"),
      EnvironmentGetOrCreate: served(),
      ImageGetOrCreate: served("registry tags and snapshot images; layers (RUN, ...) fail their build with the reason"),
      ImageFromId: served(),
      ImageDelete: served(),
      ImageJoinStreaming: served("every image is built at once: one SUCCESS result"),
      ImageBuildChainGet: refused("no build chains: images are registry tags"),
      ImageGetByTag: served("names in this workspace, per environment (empty: the default, main)"),
      ImageListTags: refused("named images are looked up by name only: no listing"),
      ImageNameDelete: served("the request names no environment: the default one (main)"),
      ImagePublish: served("names in this workspace only; no revision ids"),
      ImageTagRevisions: refused("named images keep no revision history"),
      SecretGetOrCreate: served("ephemeral secrets (a create's env)"),
      SecretDelete: served(),
      SecretGetInfo: refused("only ephemeral secrets: nothing named to inspect"),
      SecretList: refused("only ephemeral secrets: nothing named to list"),
      SecretUpdate: refused("only ephemeral secrets: nothing named to update"),
      SandboxCreate: served("V1"),
      SandboxCreateV2: served(),
      SandboxGetTaskId: served(),
      SandboxGetTaskIdV2: served(),
      SandboxGetCommandRouterAccess: served(),
      SandboxTerminate: served(),
      SandboxTerminateV2: served(),
      SandboxWait: served(),
      SandboxWaitV2: served(),
      SandboxList: served(),
      SandboxListV2: served(),
      SandboxTagsSet: served(),
      SandboxTagsSetV2: served(),
      SandboxTagsGet: served(),
      SandboxTagsGetV2: served(),
      SandboxGetFromName: served(),
      SandboxGetFromNameV2: served(),
      SandboxSetName: served(),
      SandboxGetLogs: served("the entrypoint's stdout/stderr (V1)"),
      SandboxStdinWrite: served("the entrypoint's stdin (V1)"),
      SandboxWaitUntilReady: served("no readiness probes: ready from creation"),
      SandboxGetTunnels: served("always none: no port is exposed"),
      SandboxGetTunnelsV2: served("always none: no port is exposed"),
      SandboxGetResourceUsage: refused("no resource accounting"),
      SandboxCreateConnectToken: refused(NO_NETWORK),
      SandboxCreateConnectTokenV2: refused(NO_NETWORK),
      SandboxContainerCreateV2: refused(NO_SIDECARS),
      SandboxRestore: refused(NO_MEMORY_SNAPSHOTS),
      SandboxRestoreV2: refused(NO_MEMORY_SNAPSHOTS),
      SandboxSnapshot: refused(NO_MEMORY_SNAPSHOTS),
      SandboxSnapshotGet: refused(NO_MEMORY_SNAPSHOTS),
      SandboxSnapshotWait: refused(NO_MEMORY_SNAPSHOTS),
      SandboxGetExitSnapshot: refused(NO_MEMORY_SNAPSHOTS),
      SandboxGetExitSnapshotV2: refused(NO_MEMORY_SNAPSHOTS),
      SandboxSnapshotFs: refused("the Python client's filesystem snapshot; the JS SDKs use TaskSnapshotFilesystem (served)"),
      SandboxSnapshotFsAsync: refused("the Python client's filesystem snapshot; the JS SDKs use TaskSnapshotFilesystem (served)"),
      SandboxSnapshotFsAsyncGet: refused("the Python client's filesystem snapshot; the JS SDKs use TaskSnapshotFilesystem (served)"),
      ContainerFilesystemExec: served("0.7.x `sb.open()`: open/read/readline/write/seek/flush/close, byte ranges, ls/mkdir/rm; no watch"),
      ContainerFilesystemExecGetOutput: served(),
      ContainerExec: refused("the control plane's exec of the Python client; the JS SDKs exec through the task command router (served)"),
      ContainerExecGetOutput: refused("the control plane's exec of the Python client; the JS SDKs exec through the task command router (served)"),
      ContainerExecPutInput: refused("the control plane's exec of the Python client; the JS SDKs exec through the task command router (served)"),
      ContainerExecWait: refused("the control plane's exec of the Python client; the JS SDKs exec through the task command router (served)"),
      ContainerCheckpoint: refused(RUNTIME_ONLY),
      ContainerHeartbeat: refused(RUNTIME_ONLY),
      ContainerHello: refused(RUNTIME_ONLY),
      ContainerLog: refused(RUNTIME_ONLY),
      ContainerReloadVolumes: refused(RUNTIME_ONLY),
      ContainerServerLifecycleReady: refused(RUNTIME_ONLY),
      ContainerStop: refused(RUNTIME_ONLY),
      TaskGetCommandRouterAccess: served(),
      TaskClusterHello: refused(RUNTIME_ONLY),
      TaskCurrentInputs: refused(RUNTIME_ONLY),
      TaskGetInfo: refused(RUNTIME_ONLY),
      TaskList: refused(RUNTIME_ONLY),
      TaskResult: refused(RUNTIME_ONLY),
    }),
    ...router({
      TaskExecStart: served("argv as given; with pty_info on a real terminal in the jail (its size, TERM variables; stdout is the terminal, stdin typed into it)"),
      TaskExecStdioRead: served(),
      TaskExecWait: served(),
      TaskExecPoll: served(),
      TaskExecStdinWrite: served(),
      TaskExecStdinWriteStream: served(),
      TaskExecStdinStatus: served(),
      TaskSnapshotFilesystem: served("the writable directories, copied while frozen"),
      SandboxStdioReadV2: served("the entrypoint's stdout/stderr (V2)"),
      SandboxStdinWriteV2: served("the entrypoint's stdin (V2)"),
      SandboxWaitUntilReady: served("no readiness probes: ready from creation"),
      TaskSnapshotMemory: refused(NO_MEMORY_SNAPSHOTS),
      TaskContainerCreate: refused(NO_SIDECARS),
      TaskContainerGet: refused(NO_SIDECARS),
      TaskContainerList: refused(NO_SIDECARS),
      TaskContainerTerminate: refused(NO_SIDECARS),
      TaskContainerWait: refused(NO_SIDECARS),
      TaskMountDirectory: refused(NO_DIR_IMAGES),
      TaskUnmountDirectory: refused(NO_DIR_IMAGES),
      TaskSnapshotDirectory: refused(NO_DIR_IMAGES),
      TaskReloadVolumes: refused("no volumes"),
      TaskSetNetworkAccess: refused(NO_NETWORK),
      TaskSetOutboundPolicy: refused(NO_NETWORK),
    }),
  },
  refusedGroups: {
    "ModalClient/App": "apps are names for sandboxes: deployments, logs, layouts, tags and lifecycles are not emulated (AppGetOrCreate is)",
    "ModalClient/Environment": "one environment per name, made on first use; environments are not administered here",
    "ModalClient/PersistentSandbox": NO_MEMORY_SNAPSHOTS,
    "ModalClient/Attempt": "Functions are not emulated (sandboxes only)",
    "ModalClient/Blob": "Functions are not emulated (sandboxes only)",
    "ModalClient/Class": "Functions are not emulated (sandboxes only)",
    "ModalClient/Function": "Functions are not emulated (sandboxes only)",
    "ModalClient/Map": "Functions are not emulated (sandboxes only)",
    "ModalClient/Flash": "Functions are not emulated (sandboxes only)",
    "ModalClient/Endpoint": "web endpoints are not emulated (no network)",
    "ModalClient/Webhook": "web endpoints are not emulated (no network)",
    "ModalClient/Domain": "web endpoints are not emulated (no network)",
    "ModalClient/Proxy": "static-IP proxies are not emulated (no network)",
    "ModalClient/Tunnel": NO_NETWORK,
    "ModalClient/Dict": "Dicts are not emulated (sandboxes only)",
    "ModalClient/Queue": "Queues are not emulated (sandboxes only)",
    "ModalClient/Volume": "no volumes: a sandbox's disk is its own",
    "ModalClient/SharedVolume": "no volumes: a sandbox's disk is its own",
    "ModalClient/Mount": "no mounts: images are names",
    "ModalClient/Cluster": "one node, no clusters",
    "ModalClient/Notebook": "notebooks are not emulated",
    "ModalClient/Template": "workspace templates are not emulated",
    "ModalClient/Token": "one token pair per emulator: token flows are not emulated",
    "ModalClient/Curl": "web endpoints are not emulated (no network)",
    "ModalClient/Metrics": "no metrics",
    "ModalClient/Server": "no metrics",
    "ModalClient/Service": "workspace administration is not emulated",
    "ModalClient/User": "workspace administration is not emulated",
    "ModalClient/Workspace": "workspace administration is not emulated",
  },
};

/** Refused methods with their reason, by path, for the gRPC server (only those outside the proto). */
export function refusedPaths(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, entry] of Object.entries(MODAL_COVERAGE.operations)) {
    if (entry.status !== "refused") continue;
    const [group, method] = key.split(".") as [string, string];
    out[`/${group === "TaskCommandRouter" ? ROUTER_SERVICE : CONTROL_SERVICE}/${method}`] = entry.reason!;
  }
  return out;
}
