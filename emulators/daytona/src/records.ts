import type { Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";

/** The `SandboxState` values of `@daytona/api-client` this emulator uses. */
export type SandboxState =
  | "creating"
  | "started"
  | "stopping"
  | "stopped"
  | "starting"
  | "archiving"
  | "archived"
  | "restoring"
  | "destroying"
  | "destroyed"
  | "pausing"
  | "paused"
  | "resuming"
  | "resizing"
  | "snapshotting"
  | "error";

/** One sandbox as the control plane keeps it; `jail` is its backend sandbox (real processes and files). */
export interface SandboxRecord {
  id: string;
  name: string;
  organizationId: string;
  snapshot: string | undefined;
  /** The Dockerfile of an image-backed sandbox (`buildInfo.dockerfileContent`). */
  dockerfile: string | undefined;
  user: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  target: string;
  cpu: number;
  gpu: number;
  memory: number;
  disk: number;
  state: SandboxState;
  errorReason: string | undefined;
  /** Minutes; 0 disables auto-stop. */
  autoStopInterval: number;
  /** Minutes; 0 disables auto-pause (exclusive with auto-stop). */
  autoPauseInterval: number;
  public: boolean;
  /** Minutes after stopping; 0 means the maximum. */
  autoArchiveInterval: number;
  /** Minutes after stopping; negative disables, 0 deletes on stop. */
  autoDeleteInterval: number;
  /** Epoch ms of the TTL (`ttlMinutes`), when one is set. */
  autoDestroyAt: number | undefined;
  createdAt: number;
  /** Real epoch ms the record was made: `maxLifetimeMs` counts from here whatever the vendor clock says. */
  jailBornAt: number;
  updatedAt: number;
  lastActivityAt: number;
  /** When it last stopped (epoch ms): the archive and delete intervals count from here. */
  stoppedAt: number | undefined;
  /** Toolbox requests (and log streams) open right now: the sandbox is active while any is. */
  activeRequests: number;
  /** A state change still in progress (another one is refused with 409 meanwhile). */
  pending: Promise<void> | undefined;
  jail: Jail | undefined;
  /** How many times its jail was (re)started: the daemon's sessions live for one boot. */
  boots: number;
}

/** States that hold CPU and memory of the organization's quota. */
export const RUNNING_STATES: ReadonlySet<SandboxState> = new Set(["creating", "starting", "restoring", "started", "stopping", "pausing", "paused", "resuming", "resizing", "snapshotting"]);
/** States whose disk still counts (everything but archived and gone). */
export const DISK_STATES: ReadonlySet<SandboxState> = new Set([
  "creating",
  "starting",
  "restoring",
  "started",
  "stopping",
  "stopped",
  "archiving",
  "pausing",
  "paused",
  "resuming",
  "resizing",
  "snapshotting",
  "error",
]);

const ISO = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The `Sandbox` DTO (required fields of the generated model, plus the optional ones the SDK reads). */
export function sandboxDto(record: SandboxRecord, toolboxProxyUrl: string): Record<string, unknown> {
  return {
    ...sandboxListItem(record, toolboxProxyUrl),
    env: { ...record.env },
    volumes: [],
    ...(record.dockerfile === undefined
      ? {}
      : { buildInfo: { dockerfileContent: record.dockerfile, contextHashes: [], createdAt: ISO(record.createdAt), updatedAt: ISO(record.createdAt), snapshotRef: "" } }),
  };
}

/** A `SandboxListItem`: the DTO without env, volumes and buildInfo, but with the toolbox URL. */
export function sandboxListItem(record: SandboxRecord, toolboxProxyUrl: string): Record<string, unknown> {
  return {
    id: record.id,
    organizationId: record.organizationId,
    name: record.name,
    ...(record.snapshot === undefined ? {} : { snapshot: record.snapshot }),
    user: record.user,
    labels: { ...record.labels },
    public: record.public,
    networkBlockAll: false,
    target: record.target,
    cpu: record.cpu,
    gpu: record.gpu,
    memory: record.memory,
    disk: record.disk,
    state: record.state,
    desiredState: desiredState(record.state),
    ...(record.errorReason === undefined ? {} : { errorReason: record.errorReason, recoverable: false }),
    autoStopInterval: record.autoStopInterval,
    autoPauseInterval: record.autoPauseInterval,
    autoArchiveInterval: record.autoArchiveInterval,
    autoDeleteInterval: record.autoDeleteInterval,
    ...(record.autoDestroyAt === undefined ? {} : { autoDestroyAt: ISO(record.autoDestroyAt) }),
    createdAt: ISO(record.createdAt),
    updatedAt: ISO(record.updatedAt),
    lastActivityAt: ISO(record.lastActivityAt),
    // Paused sandboxes keep their memory (the jail is frozen): what Daytona offers its VM class.
    sandboxClass: "linux-vm",
    daemonVersion: "emulator",
    toolboxProxyUrl,
  };
}

function desiredState(state: SandboxState): string {
  switch (state) {
    case "creating":
    case "starting":
    case "restoring":
    case "resuming":
    case "resizing":
    case "snapshotting":
    case "started":
      return "started";
    case "pausing":
    case "paused":
      return "paused";
    case "stopping":
    case "stopped":
      return "stopped";
    case "archiving":
    case "archived":
      return "archived";
    default:
      return "destroyed";
  }
}
