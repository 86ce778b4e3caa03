import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import type { EgressSpec, Sandbox, SandboxBackend, SandboxLimits } from "@paperclip-sandbox/sandbox-backend";
import { execOnPty } from "@paperclip-sandbox/sandbox-backend";
import type { VendorClock } from "@paperclip-sandbox/emulator-kit";
import { FS_TOOLS_PATH, FsToolProcess } from "./fs-tools.js";
import { ids } from "./ids.js";
import { BackendProcess, type EmulatedProcess } from "./process.js";
import type { SnapshotStore } from "./snapshots.js";
import type { ImageRecord, ImageStore } from "./images.js";
import { NETWORK_ACCESS, result, STATUS, type GenericResult, type WireTag } from "./wire.js";

/** Where the backend's jails can be written (the rest of the tree is the host's, read-only). */
const WRITABLE_ROOTS = ["/workspace", "/home/sandbox", "/tmp"];
/** Modal's longest sandbox timeout (24 h). */
const MAX_TIMEOUT_SECS = 86_400;
const DEFAULT_TIMEOUT_SECS = 300;
/** Each output stream of an exec is kept up to this many bytes in the supervisor (its maximum). */
const EXEC_OUTPUT_BYTES = 16 * 1024 * 1024;
const NAME_RULE = /^[A-Za-z0-9._-]{1,64}$/;
/** The backend's own deadline trails Modal's by this much: the emulator's timer ends the sandbox first. */
const BACKEND_TTL_MARGIN_MS = 60_000;

/** The decoded `modal.client.Sandbox` definition fields the emulator reads. */
export interface SandboxDefinition {
  entrypoint_args: string[];
  image_id: string;
  secret_ids: string[];
  resources: { memory_mb: number; milli_cpu: number; memory_mb_max: number; milli_cpu_max: number } | null;
  timeout_secs: number;
  workdir?: string;
  block_network: boolean;
  pty_info: { enabled: boolean } | null;
  network_access: { network_access_type: number; allowed_cidrs: string[]; allowed_domains: string[] } | null;
  name?: string;
  idle_timeout_secs?: number;
}

export interface SandboxRecord {
  readonly id: string;
  readonly version: 1 | 2;
  readonly taskId: string;
  readonly appId: string;
  name: string | undefined;
  readonly imageId: string;
  readonly workdir: string | undefined;
  readonly timeoutSecs: number;
  readonly idleTimeoutSecs: number | undefined;
  readonly createdAt: number;
  readonly env: Record<string, string>;
  tags: Map<string, string>;
  state: "running" | "finished";
  result: GenericResult | undefined;
  finishedAt: number | undefined;
  jail: Sandbox | undefined;
  readonly execs: Map<string, EmulatedProcess>;
  /** The entrypoint's process (its stdio is the sandbox's), when the definition named one. */
  entrypoint: EmulatedProcess | undefined;
  /** The last V1 stdin write index applied (SandboxStdinWrite is indexed from 1; retries repeat one). */
  stdinIndex: number;
  /** Set while a filesystem snapshot holds the sandbox frozen; new work waits for it. */
  frozen: Promise<void> | undefined;
  /** Resolves when the sandbox has finished. */
  readonly finished: Promise<void>;
}

interface Internals {
  markFinished(): void;
  cancelLife(): void;
  cancelIdle: (() => void) | undefined;
  running: number;
}

export interface CreateSpec {
  version: 1 | 2;
  appId: string;
  definition: SandboxDefinition;
  tags: WireTag[];
  env: Record<string, string>;
  /** The SDK's `x-idempotency-key`: a retried create answers with the sandbox the first one made. */
  idempotencyKey: string | undefined;
}

export interface ExecSpec {
  execId: string;
  argv: string[];
  workdir: string | undefined;
  timeoutSecs: number | undefined;
  env: Record<string, string>;
  stderrToStdout: boolean;
  /** Run on a pseudo-terminal (`pty_info.enabled`): stdout is the terminal, stdin is typed into it. */
  pty?: ExecPty;
}

/** An exec's terminal: its size and the terminal variables from `pty_info`. */
export interface ExecPty {
  cols: number;
  rows: number;
  env: Record<string, string>;
}

/** `modal.client.PTYInfo` as decoded. */
export interface PtyInfoMessage {
  enabled?: boolean;
  winsz_rows?: number;
  winsz_cols?: number;
  env_term?: string;
  env_colorterm?: string;
  env_term_program?: string;
  pty_type?: number;
  no_terminate_on_idle_stdin?: boolean;
}

const MAX_PTY_DIMENSION = 10_000;

/** The terminal `pty_info` asks for: 24x80 where a size is unset, `TERM`/`COLORTERM`/`TERM_PROGRAM` where given. */
export function ptyOf(info: PtyInfoMessage): ExecPty {
  const dimension = (value: number | undefined, name: string, fallback: number) => {
    if (!value) return fallback;
    if (value > MAX_PTY_DIMENSION) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `pty_info.${name} must be at most ${MAX_PTY_DIMENSION}`);
    return value;
  };
  const env: Record<string, string> = {};
  if (info.env_term) env.TERM = info.env_term;
  if (info.env_colorterm) env.COLORTERM = info.env_colorterm;
  if (info.env_term_program) env.TERM_PROGRAM = info.env_term_program;
  return { rows: dimension(info.winsz_rows, "winsz_rows", 24), cols: dimension(info.winsz_cols, "winsz_cols", 80), env };
}

export interface SandboxManagerDeps {
  backend: SandboxBackend;
  clock: VendorClock;
  images: ImageStore;
  snapshots: SnapshotStore;
  appExists(appId: string): boolean;
  maxSandboxes: number;
  log(message: string): void;
}

export function checkTags(tags: readonly WireTag[]): Map<string, string> {
  const map = new Map<string, string>();
  for (const tag of tags) {
    if (!tag.tag_name || tag.tag_name.length > 256) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "tag names must be 1 to 256 characters");
    if (tag.tag_value.length > 1024) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `tag ${tag.tag_name}: values are at most 1024 characters`);
    map.set(tag.tag_name, tag.tag_value);
  }
  return map;
}

function egressOf(definition: SandboxDefinition): EgressSpec {
  const access = definition.network_access;
  // The emulator never opens the internet: OPEN runs with no network, as BLOCKED does (its limit).
  if (access?.network_access_type === NETWORK_ACCESS.ALLOWLIST) return { allowCidrs: access.allowed_cidrs, allowFqdns: access.allowed_domains };
  return { allowCidrs: [], allowFqdns: [] };
}

function limitsOf(definition: SandboxDefinition): SandboxLimits {
  const resources = definition.resources;
  if (!resources) return {};
  const memoryMb = resources.memory_mb_max || resources.memory_mb;
  const milliCpu = resources.milli_cpu_max || resources.milli_cpu;
  return { ...(memoryMb ? { memoryMb } : {}), ...(milliCpu ? { cpu: milliCpu / 1000 } : {}) };
}

function checkWorkdir(workdir: string | undefined): void {
  if (workdir === undefined || workdir === "") return;
  if (!workdir.startsWith("/")) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `workdir must be an absolute path, got: ${workdir}`);
  if (!WRITABLE_ROOTS.some((root) => workdir === root || workdir.startsWith(`${root}/`))) {
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `emulator limit: the workdir must be under ${WRITABLE_ROOTS.join(", ")} (the rest of the image is read-only here), got: ${workdir}`);
  }
}

/** Sandboxes as the control plane and the router see them: each a backend jail while it runs. */
export function createSandboxManager(deps: SandboxManagerDeps) {
  const sandboxes = new Map<string, SandboxRecord>();
  const byTask = new Map<string, SandboxRecord>();
  const internals = new WeakMap<SandboxRecord, Internals>();
  const idempotent = new Map<string, string>();

  const running = () => [...sandboxes.values()].filter((s) => s.state === "running");

  const armIdle = (record: SandboxRecord) => {
    const inner = internals.get(record)!;
    inner.cancelIdle?.();
    inner.cancelIdle = undefined;
    if (record.idleTimeoutSecs === undefined || record.state !== "running" || inner.running > 0) return;
    inner.cancelIdle = deps.clock.after(record.idleTimeoutSecs * 1000, () => void finish(record, result(STATUS.IDLE_TIMEOUT)));
  };

  /** Any exec, stdin write or read counts as activity (Modal's idle timeout counts from the last). */
  const touch = (record: SandboxRecord) => {
    if (record.state === "running") armIdle(record);
  };

  // Sandboxes still ending (output kept, jail destroyed): close waits for them before the emulator's directory goes.
  const ending = new Set<Promise<void>>();

  function finish(record: SandboxRecord, outcome: GenericResult): Promise<void> {
    if (record.state === "finished") return Promise.resolve();
    const run = endSandbox(record, outcome);
    ending.add(run);
    void run.catch(() => undefined).finally(() => ending.delete(run));
    return run;
  }

  async function endSandbox(record: SandboxRecord, outcome: GenericResult): Promise<void> {
    record.state = "finished";
    record.result = outcome;
    record.finishedAt = Date.now();
    const inner = internals.get(record)!;
    inner.cancelLife();
    inner.cancelIdle?.();
    // The entrypoint's output stays readable after the sandbox (its jail) is gone.
    if (record.entrypoint instanceof BackendProcess) record.entrypoint = await record.entrypoint.capture().catch(() => record.entrypoint);
    for (const process of record.execs.values()) process.kill();
    record.entrypoint?.kill();
    try {
      await deps.backend.destroy(record.id);
    } catch (error) {
      deps.log(`modal emulator: destroying sandbox ${record.id} failed: ${(error as Error).message}`);
    }
    record.jail = undefined;
    inner.markFinished();
  }

  async function create(spec: CreateSpec): Promise<SandboxRecord> {
    if (spec.idempotencyKey) {
      const earlier = idempotent.get(spec.idempotencyKey);
      const found = earlier ? sandboxes.get(earlier) : undefined;
      if (found) return found;
    }
    const definition = spec.definition;
    if (!deps.appExists(spec.appId)) throw new GrpcError(GrpcStatus.NOT_FOUND, `App ${spec.appId} not found`);
    const image: ImageRecord | undefined = deps.images.get(definition.image_id);
    if (!image) throw new GrpcError(GrpcStatus.NOT_FOUND, `Image ${definition.image_id} not found`);
    if (definition.pty_info?.enabled) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "emulator limit: PTY sandboxes are not supported");
    const timeoutSecs = definition.timeout_secs || DEFAULT_TIMEOUT_SECS;
    if (timeoutSecs > MAX_TIMEOUT_SECS) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `timeout must be at most ${MAX_TIMEOUT_SECS} seconds`);
    checkWorkdir(definition.workdir);
    const tags = checkTags(spec.tags);
    const name = definition.name || undefined;
    if (name !== undefined) {
      if (!NAME_RULE.test(name)) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "sandbox names are 1 to 64 of A-Z a-z 0-9 . _ -");
      if (running().some((s) => s.appId === spec.appId && s.name === name)) {
        throw new GrpcError(GrpcStatus.ALREADY_EXISTS, `a running Sandbox named '${name}' already exists in this App`);
      }
    }
    if (running().length >= deps.maxSandboxes) {
      throw new GrpcError(GrpcStatus.RESOURCE_EXHAUSTED, `Sandbox quota exceeded: at most ${deps.maxSandboxes} running Sandboxes`);
    }

    let markFinished!: () => void;
    const finished = new Promise<void>((resolve) => (markFinished = resolve));
    const record: SandboxRecord = {
      id: spec.version === 1 ? ids.sandboxV1() : ids.sandboxV2(),
      version: spec.version,
      taskId: ids.task(),
      appId: spec.appId,
      name,
      imageId: image.id,
      workdir: definition.workdir || undefined,
      timeoutSecs,
      idleTimeoutSecs: definition.idle_timeout_secs || undefined,
      createdAt: Date.now(),
      env: spec.env,
      tags,
      state: "running",
      result: undefined,
      finishedAt: undefined,
      jail: undefined,
      execs: new Map(),
      entrypoint: undefined,
      stdinIndex: 0,
      frozen: undefined,
      finished,
    };
    const inner: Internals = { markFinished, cancelLife: () => undefined, cancelIdle: undefined, running: 0 };
    internals.set(record, inner);
    sandboxes.set(record.id, record);
    byTask.set(record.taskId, record);
    if (spec.idempotencyKey) idempotent.set(spec.idempotencyKey, record.id);

    // Reserved (name, quota) before the jail starts; a failure from here on ends the record.
    let ready: () => void = () => undefined;
    record.frozen = new Promise<void>((resolve) => (ready = resolve));
    try {
      record.jail = await deps.backend.create({
        id: record.id,
        expiresAt: deps.clock.realDeadline(deps.clock.now() + deps.clock.duration(timeoutSecs * 1000)) + BACKEND_TTL_MARGIN_MS,
        env: spec.env,
        egress: egressOf(definition),
        limits: limitsOf(definition),
      });
      if (image.kind === "snapshot") await deps.snapshots.restore(image.id, record.jail);
      if (record.workdir) await record.jail.files.mkdir(record.workdir, { parents: true });
      inner.cancelLife = deps.clock.after(timeoutSecs * 1000, () => void finish(record, result(STATUS.TIMEOUT)));
      armIdle(record);
      if (definition.entrypoint_args.length > 0) await startEntrypoint(record, definition.entrypoint_args);
    } catch (error) {
      await finish(record, result(STATUS.INIT_FAILURE, 0, (error as Error).message));
      throw error instanceof GrpcError ? error : new GrpcError(GrpcStatus.INTERNAL, `the sandbox could not start: ${(error as Error).message}`);
    } finally {
      record.frozen = undefined;
      ready();
    }
    return record;
  }

  /** The sandbox's main command: when it exits, the sandbox finishes with its exit code. */
  async function startEntrypoint(record: SandboxRecord, argv: string[]): Promise<void> {
    const handle = await record.jail!.exec({ argv, cwd: record.workdir ?? "/", detached: true, tag: "entrypoint", stdin: true, outputLimitBytes: EXEC_OUTPUT_BYTES });
    record.entrypoint = new BackendProcess("entrypoint", handle);
    void handle.exited.then(
      (exit) => finish(record, result(exit.exitCode === 0 ? STATUS.SUCCESS : STATUS.FAILURE, exit.exitCode ?? 137)),
      () => undefined,
    );
  }

  /** A running sandbox by id (NOT_FOUND when unknown; `finished` records are returned too). */
  function get(id: string): SandboxRecord {
    const record = sandboxes.get(id);
    if (!record) throw new GrpcError(GrpcStatus.NOT_FOUND, `Sandbox ${id} not found`);
    return record;
  }

  /** The running sandbox of a task, ready for work (NOT_FOUND once it has finished). */
  async function runningTask(taskId: string): Promise<SandboxRecord> {
    const record = byTask.get(taskId);
    if (!record) throw new GrpcError(GrpcStatus.NOT_FOUND, `Task ${taskId} not found`);
    while (record.frozen) await record.frozen;
    if (record.state !== "running" || !record.jail) {
      // The reason a sandbox failed to start is otherwise only in SandboxWait's result.
      const why = record.result?.exception ? `: ${record.result.exception}` : "";
      throw new GrpcError(GrpcStatus.NOT_FOUND, `Task ${taskId} is not running (its Sandbox has finished${why})`);
    }
    touch(record);
    return record;
  }

  async function startExec(record: SandboxRecord, spec: ExecSpec): Promise<EmulatedProcess> {
    const existing = record.execs.get(spec.execId);
    if (existing) return existing; // a retried start
    if (spec.argv.length === 0) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "command_args must not be empty");
    checkWorkdir(spec.workdir);
    let process: EmulatedProcess;
    if (spec.argv[0] === FS_TOOLS_PATH) {
      process = new FsToolProcess(spec.execId, spec.argv, record.jail!.files);
    } else {
      const argv = spec.stderrToStdout && !spec.pty ? ["/bin/sh", "-c", 'exec 2>&1; exec "$0" "$@"', ...spec.argv] : spec.argv;
      const common = {
        cwd: spec.workdir || record.workdir || "/",
        env: { ...record.env, ...spec.env, ...spec.pty?.env },
        ...(spec.timeoutSecs ? { timeoutMs: spec.timeoutSecs * 1000 } : {}),
        tag: spec.execId,
        outputLimitBytes: EXEC_OUTPUT_BYTES,
      };
      let handle;
      try {
        // On a terminal the command leads its session; its output (both streams) is the terminal's, on stdout.
        handle = spec.pty ? (await execOnPty(record.jail!, { ...common, argv, cols: spec.pty.cols, rows: spec.pty.rows })).handle : await record.jail!.exec({ ...common, argv, stdin: true });
      } catch (error) {
        throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, `exec failed: ${(error as Error).message}`);
      }
      process = new BackendProcess(spec.execId, handle);
    }
    record.execs.set(spec.execId, process);
    const inner = internals.get(record)!;
    inner.running += 1;
    touch(record);
    void process.exit.then(() => {
      inner.running -= 1;
      touch(record);
    });
    return process;
  }

  /** Copies the sandbox's writable directories into a new image (frozen meanwhile). */
  async function snapshot(record: SandboxRecord, imageId: string): Promise<void> {
    let thawed!: () => void;
    const frozen = new Promise<void>((resolve) => (thawed = resolve));
    while (record.frozen) await record.frozen;
    if (record.state !== "running" || !record.jail) throw new GrpcError(GrpcStatus.NOT_FOUND, `Sandbox ${record.id} has finished`);
    record.frozen = frozen;
    try {
      await deps.snapshots.capture(imageId, record.jail);
    } finally {
      record.frozen = undefined;
      thawed();
    }
  }

  return {
    create,
    get,
    runningTask,
    startExec,
    snapshot,
    touch,
    terminate: (record: SandboxRecord) => finish(record, result(STATUS.TERMINATED)),
    all: () => [...sandboxes.values()],
    running,
    async close(): Promise<void> {
      await Promise.all([...running().map((record) => finish(record, result(STATUS.TERMINATED))), ...ending]);
    },
  };
}

export type SandboxManager = ReturnType<typeof createSandboxManager>;
