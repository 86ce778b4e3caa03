/**
 * The public API of the sandbox backend: local bubblewrap jails with caller-chosen ids, exec
 * handles whose output outlives the connection that started them, in-jail file ops, cold
 * stop/start, warm freeze/thaw and an expiry that can move. Vendor emulators and the bubblewrap
 * provider are built on these types; the implementation lives in backend.ts and sandbox.ts.
 */
import type { Readable } from "node:stream";
import type { ScriptRunner } from "@paperclip-sandbox/kit";
import type { EgressDenial } from "./egress/proxy.js";
import type { Resolver } from "./egress/resolver.js";
import type { LimitName } from "./jail/cgroups.js";
import type { UnenforcedProtection } from "./jail/runtime.js";

export type SandboxState = "running" | "stopped" | "frozen";

export interface SandboxLimits {
  /** CPU cores (e.g. 0.5), cgroup cpu quota. */
  cpu?: number;
  /** Memory of all the sandbox's processes (cgroup, swap included); also the size of its /dev/shm. */
  memoryMb?: number;
  pids?: number;
  /**
   * What the sandbox may write to its disk (workspace, home, cache, /tmp together): a filesystem of
   * this size of its own, for a root worker with e2fsprogs and loop devices; otherwise reported in
   * `unenforcedLimits`.
   */
  diskMb?: number;
}

/** What the sandbox may reach through the host-side egress proxy; empty lists mean no network at all. */
export interface EgressSpec {
  allowFqdns: string[];
  allowCidrs: string[];
}

export interface BackendOptions {
  /** Where sandbox directories live (`<stateDir>/leases/<id>/`); created 0700 on first use. */
  stateDir: string;
  /** bwrap binary; default `bwrap` on PATH. */
  bwrapPath?: string;
  /** Host path of the compiled supervisor entry; default the one shipped in this package. */
  supervisorScript?: string;
  /** Node binary bound into the jail when its tree has none; default this process's node. */
  nodeBinary?: string;
  /**
   * Host user the jails run as (the sandbox user, uid 1000 inside, is this host uid). A root worker
   * defaults to uid and gid 2000000000, never root; an unprivileged worker's jails run as its own
   * uid (giving another one is an error). The jail prelude switches to it (x86_64, aarch64); elsewhere
   * that needs setpriv (util-linux).
   */
  hostUser?: { uid: number; gid: number };
  /** DNS for the egress proxy; default the system resolver. */
  resolver?: Resolver & { pinned?(host: string): boolean };
  /**
   * How freeze stops a jail: `auto` uses the cgroup freezer where this worker may create cgroups and
   * SIGSTOP/SIGCONT of every process in the jail's pid namespace otherwise; `signal` always signals.
   */
  freezer?: "auto" | "signal";
  /**
   * A sandbox's supervisor idle this long (no connection, no command running or kept, no other
   * process in the jail, /dev/shm empty) exits and its jail ends: the sandbox stays running
   * ("dormant", holding no process or memory) and the next call starts a fresh jail on the same
   * disk first. Default 0: never (the supervisor stays, about 7 MiB of private memory per sandbox).
   */
  idleStopMs?: number;
}

export interface CreateSandboxOptions {
  /** 1-253 characters from [A-Za-z0-9._-], starting with a letter or digit; default a random `sbx-` id. */
  id?: string;
  /** Host directory used as the jail's root tree instead of the host's /usr, /bin, /lib, /etc. */
  rootfs?: string;
  /** Environment of every process started in the sandbox (on top of PATH, HOME, ...). */
  env?: Record<string, string>;
  limits?: SandboxLimits;
  /** Lifetime from now; give this or `expiresAt`. */
  ttlMs?: number;
  /** Absolute expiry (epoch ms); give this or `ttlMs`. */
  expiresAt?: number;
  egress?: EgressSpec;
  labels?: Record<string, string>;
  /** Any JSON-serializable object (at most 64 KiB as JSON). */
  metadata?: Record<string, unknown>;
  /**
   * Who the sandbox's processes are inside the jail (default `sandbox`, uid/gid 1000, home
   * `/home/sandbox`): a vendor's default user (E2B's `user` with `/home/user`), a pod's `runAsUser`.
   * The home is the sandbox's writable home directory wherever it is put; its `.cache` goes with it.
   */
  user?: SandboxUser;
  /**
   * Further writable directories, empty at create, kept across stop and start, bound at any path of
   * the jail (a Kubernetes emptyDir). A path over a read-only host directory must already exist there.
   */
  mounts?: SandboxMount[];
}

export interface SandboxUser {
  /** Login name in the jail's passwd (default `sandbox`): `[a-z_][a-z0-9_-]*`, at most 32. */
  name?: string;
  /** uid inside the jail (default 1000; 0 is a root without capabilities). */
  uid?: number;
  /** gid inside the jail (default 1000). */
  gid?: number;
  /** Absolute path of the home directory (default `/home/sandbox`). */
  home?: string;
}

export interface SandboxMount {
  /** Absolute in-jail path; not `/`, not under /proc, /dev, /sys, /opt/paperclip, /run/paperclip-egress. */
  path: string;
  /** Bound read-only (default false). */
  readOnly?: boolean;
  /** Mounts naming the same volume share one directory (a DNS label); default: a directory of its own. */
  volume?: string;
  /** Bind this relative directory of the volume (made at create) instead of its root. */
  subPath?: string;
}

export interface SandboxSummary {
  id: string;
  /** `incomplete`: a directory without a readable record (a create that died half-way). */
  state: SandboxState | "incomplete";
  labels: Record<string, string>;
  metadata: Record<string, unknown>;
  /** Epoch ms; null for an incomplete directory. */
  createdAt: number | null;
  expiresAt: number | null;
  /** The worker that last started or adopted the sandbox is still running. */
  ownerAlive: boolean;
  /** The jail is running (or frozen). */
  alive: boolean;
  /** Past its expiry (an incomplete directory counts once it is a minute old). */
  expired: boolean;
}

export interface ListFilter {
  /** Every given label must match exactly. */
  labels?: Record<string, string>;
}

export interface SandboxBackend {
  readonly stateDir: string;
  create(options: CreateSandboxOptions): Promise<Sandbox>;
  /** The sandbox, adopting it when another (e.g. crashed) worker started it; null when gone or expired. */
  get(id: string): Promise<Sandbox | null>;
  list(filter?: ListFilter): Promise<SandboxSummary[]>;
  /** One sandbox's summary from its directory, without adopting it; null when there is no directory. */
  summary(id: string): Promise<SandboxSummary | null>;
  /**
   * Ends the sandbox for good: resolves only once no process of it is left (pid namespace scan and
   * cgroups) and its cgroups and directories are gone. Idempotent.
   */
  destroy(id: string): Promise<void>;
  /** Drops this worker's handles (egress proxies, connections); jails keep running for a later worker. */
  close(): Promise<void>;
}

/** Host directories of a sandbox (for inspection: never write into them while sandboxed code runs). */
export interface SandboxPaths {
  dir: string;
  workspace: string;
  home: string;
  cache: string;
  tmp: string;
  log: string;
}

export interface Sandbox {
  readonly id: string;
  /** `destroyed` once this handle's sandbox has been destroyed. */
  readonly state: SandboxState | "destroyed";
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly egress: Readonly<EgressSpec>;
  readonly limits: Readonly<SandboxLimits>;
  /** Requested limits this worker could not enforce (no cgroup access, no per-sandbox filesystem), with the reason. */
  readonly unenforcedLimits: ReadonlyArray<{ limit: LimitName; reason: string }>;
  /** Protections of the supervisor this host cannot give (an arch without a seccomp table, a static node), with the reason. */
  readonly unenforcedProtections: ReadonlyArray<UnenforcedProtection>;
  readonly paths: SandboxPaths;
  /** The kit's ScriptRunner over the supervisor: a command ends when its connection is lost. */
  readonly runner: ScriptRunner;
  /** Recent egress proxy refusals (at most 100), oldest first. */
  readonly denials: readonly EgressDenial[];
  readonly files: SandboxFiles;
  /**
   * A small file of the sandbox's disk read from the host, in any state (also stopped): `path` is
   * an in-jail path under /workspace, /home/sandbox or /tmp. No component is followed if it is a
   * link; null when missing, behind a link, not a regular file, or over `maxBytes` (default 64 KiB).
   */
  readStoredFile(path: string, options?: { maxBytes?: number }): Promise<Buffer | null>;
  /** Replace the labels / metadata (persisted). */
  setLabels(labels: Record<string, string>): Promise<void>;
  setMetadata(metadata: Record<string, unknown>): Promise<void>;
  exec(options: ExecOptions): Promise<ExecHandle>;
  /** Re-attaches to an exec started earlier (by any connection or worker); null when unknown. */
  attach(pid: number): Promise<ExecHandle | null>;
  /** Exec commands the supervisor knows (running, or finished and not yet reaped). */
  processes(): Promise<ProcessInfo[]>;
  /** Forgets a finished exec and its buffered output. */
  reap(pid: number): Promise<void>;
  /** Cold stop: every process ended (confirmed), disk kept. */
  stop(): Promise<void>;
  /** Launches a fresh jail on the same directories (after stop, or after the jail died). */
  start(): Promise<void>;
  /** Warm pause: every process stopped where it is, memory kept. */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** Moves the expiry to `untilMs` (epoch ms, in the future); the host-side deadline moves with it. */
  extendTtl(untilMs: number): Promise<void>;
}

export interface ExecOptions {
  /** Run directly (no shell); give this or `script`. */
  argv?: string[];
  /** Run with `/bin/sh -c`. */
  script?: string;
  /** Default /workspace. */
  cwd?: string;
  env?: Record<string, string>;
  /** The supervisor ends the command's process group at this deadline (exit says timedOut). */
  timeoutMs?: number;
  /** Grace between SIGTERM and SIGKILL when a timeout ends the group; default 250 ms. */
  killGraceMs?: number;
  /** Open a stdin pipe (write / closeStdin); otherwise stdin is /dev/null. */
  stdin?: boolean;
  /** Keep running when the connection that started it is lost (re-attach by pid). */
  detached?: boolean;
  /** Opaque caller label, shown by processes() (at most 256 characters). */
  tag?: string;
  /** Bound of each output buffer; default 1 MiB, at most 16 MiB. Older bytes are dropped past it. */
  outputLimitBytes?: number;
}

export type OutputStreamName = "stdout" | "stderr";

export interface ExecExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
}

export interface OutputRead {
  data: Buffer;
  /** Offset of the first byte of `data` (later than asked when older bytes were dropped). */
  offset: number;
  nextOffset: number;
  /** The stream is closed and `nextOffset` is its end. */
  ended: boolean;
  /** Bytes between the asked offset and `offset` that are no longer kept. */
  dropped: number;
}

export interface OutputListener {
  onData(stream: OutputStreamName, data: Buffer, offset: number): void;
  /** Bytes [from, to) were dropped before this subscriber could read them. */
  onGap?(stream: OutputStreamName, from: number, to: number): void;
  onEnd?(stream: OutputStreamName, offset: number): void;
}

export interface OutputSubscription {
  /** The exit once the command has finished and the subscribed streams are delivered; null after close(). */
  readonly done: Promise<ExecExit | null>;
  /** Backpressure: stop / resume reading (the supervisor keeps buffering up to its bound). */
  pause(): void;
  resume(): void;
  close(): void;
}

export interface ExecHandle {
  readonly pid: number;
  /** Writes to the command's stdin (only with `stdin: true`). */
  write(data: Buffer | string): Promise<void>;
  closeStdin(): Promise<void>;
  read(stream: OutputStreamName, fromOffset?: number, options?: { maxBytes?: number }): Promise<OutputRead>;
  subscribe(from: Partial<Record<OutputStreamName, number>>, listener: OutputListener): OutputSubscription;
  readonly exited: Promise<ExecExit>;
  signal(signal: NodeJS.Signals | number, options?: { group?: boolean }): Promise<void>;
  /** Drops this handle's connection: a plain exec ends with it, a detached one keeps running. */
  close(): void;
}

export interface ProcessInfo {
  pid: number;
  tag: string | null;
  /** Previews (long commands are cut). */
  argv: string[] | null;
  script: string | null;
  cwd: string;
  detached: boolean;
  running: boolean;
  exit: ExecExit | null;
  startedAt: number;
  stdinOpen: boolean;
  output: Record<OutputStreamName, { start: number; end: number }>;
}

export interface FileInfo {
  name: string;
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  mode: number;
  uid: number;
  gid: number;
  owner: string;
  group: string;
  mtimeMs: number;
  symlinkTarget?: string;
}

/** Confinement of a file op: a path whose resolution leaves these in-jail directories is refused. */
export interface FileScope {
  roots?: string[];
}

/**
 * File ops run inside the jail by the supervisor, as the sandbox user. Paths are absolute in-jail
 * paths. Errors are SandboxFileError with an errno-like `code` (ENOENT, EEXIST, EISDIR, ENOTDIR,
 * ENOTEMPTY, EACCES, EROFS, EOUTSIDE for a path leaving the roots, E2BIG, EINVAL, ...).
 */
export interface SandboxFiles {
  read(path: string, options?: FileScope & { offset?: number; length?: number; maxBytes?: number }): Promise<Buffer>;
  readStream(path: string, options?: FileScope & { offset?: number; length?: number }): Promise<Readable>;
  /** Replaces the final component atomically (a link there is replaced, never followed); parents are created unless `createParents: false`. */
  write(path: string, data: Buffer | string | Readable, options?: FileScope & { mode?: number; createParents?: boolean }): Promise<FileInfo>;
  /** `follow: false` (default) reports a link itself. */
  stat(path: string, options?: FileScope & { follow?: boolean }): Promise<FileInfo>;
  list(path: string, options?: FileScope & { depth?: number; maxEntries?: number }): Promise<FileInfo[]>;
  mkdir(path: string, options?: FileScope & { mode?: number; parents?: boolean }): Promise<{ created: boolean }>;
  remove(path: string, options?: FileScope & { recursive?: boolean }): Promise<void>;
  move(from: string, to: string, options?: FileScope & { overwrite?: boolean }): Promise<FileInfo>;
}
