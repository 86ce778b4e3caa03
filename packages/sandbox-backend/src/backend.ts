/**
 * createSandboxBackend: the sandboxes of one state directory, as one worker sees them. Every
 * sandbox is adoptable from its directory alone, which is how a sandbox survives a worker restart
 * and how a leak clean-up finds sandboxes whose owner is gone.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { SandboxExistsError, SandboxInputError, SandboxStateError } from "./errors.js";
import { diskLimitProblem } from "./store/disk.js";
import { createResolver } from "./egress/resolver.js";
import { mountPointProblem } from "./jail/argv.js";
import { cgroupDirsNamed, removeCgroups } from "./jail/cgroups.js";
import { resolveJailHostUser } from "./jail/host-user.js";
import { createJailRuntime } from "./jail/runtime.js";
import { jailAlive, recordedJailExit } from "./jail/process.js";
import { checkSandboxId, isSandboxId } from "./ids.js";
import { normalizeCreate } from "./options.js";
import { IDLE_EXIT_CODE, LocalSandbox, type SandboxContext } from "./sandbox.js";
import { checkSocketPathLength, sandboxesDir, sandboxLayout } from "./store/layout.js";
import { processAlive, processStartTime } from "./store/proc.js";
import { readRecord, writeRecord, type SandboxRecord } from "./store/record.js";
import { createSandboxDirs, ensureStateDir, removeSandboxTree } from "./store/state-dir.js";
import { defaultSupervisorScript } from "./supervisor/script-path.js";
import type { BackendOptions, CreateSandboxOptions, ListFilter, Sandbox, SandboxBackend, SandboxSummary } from "./types.js";

/** `name` as an absolute path found on PATH (or the usual places); unchanged when it is absolute or not found. */
function resolveExecutable(name: string): string {
  if (path.isAbsolute(name)) return name;
  for (const dir of [...(process.env.PATH ?? "").split(":").filter(Boolean), "/usr/bin", "/usr/local/bin", "/bin"]) {
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return name;
}

/** A directory without a readable record counts as abandoned once it is this old. */
const INCOMPLETE_AFTER_MS = 60_000;

export function createSandboxBackend(options: BackendOptions): SandboxBackend {
  if (typeof options?.stateDir !== "string" || !path.isAbsolute(options.stateDir)) throw new SandboxInputError("stateDir must be an absolute path");
  const socketProblem = checkSocketPathLength(options.stateDir);
  if (socketProblem) throw new SandboxInputError(socketProblem);
  if (options.freezer !== undefined && options.freezer !== "auto" && options.freezer !== "signal") throw new SandboxInputError("freezer must be auto or signal");
  const idleStopMs = options.idleStopMs ?? 0;
  if (!Number.isInteger(idleStopMs) || idleStopMs < 0 || (idleStopMs > 0 && idleStopMs < 2_000) || idleStopMs > 2 ** 31 - 1) {
    throw new SandboxInputError("idleStopMs must be 0 (never) or an integer number of ms, at least 2000");
  }
  const stateDir = options.stateDir;
  const hostUser = resolveJailHostUser(options.hostUser);
  const context: SandboxContext = {
    // Absolute: the jail prelude execs it directly (no PATH search).
    bwrapPath: resolveExecutable(options.bwrapPath ?? "bwrap"),
    runtime: createJailRuntime({ stateDir, supervisorEntry: options.supervisorScript ?? defaultSupervisorScript(), hostUser }),
    nodeBinary: options.nodeBinary ?? fs.realpathSync(process.execPath),
    resolver: options.resolver ?? createResolver(new Map()),
    freezer: options.freezer ?? "auto",
    diskProblem: diskLimitProblem(),
    idleStopMs,
    owner: { pid: process.pid, startTime: processStartTime(process.pid), uid: process.getuid?.() ?? 0 },
  };
  const held = new Map<string, LocalSandbox>();
  const adopting = new Map<string, Promise<LocalSandbox | null>>();
  // Destroys under way: close waits for them, so whoever removes the state directory next never races a jail still ending.
  const destroying = new Set<Promise<void>>();
  // Creates under way: close waits for them too, then lets their sandboxes go with the others.
  const creating = new Set<Promise<unknown>>();
  let stateDirReady: Promise<void> | null = null;
  let closed = false;

  const requireOpen = () => {
    if (closed) throw new SandboxStateError("this sandbox backend has been closed");
  };

  const load = async (id: string): Promise<LocalSandbox | null> => {
    const record = await readRecord(sandboxLayout(stateDir, id), id);
    return record ? new LocalSandbox(context, sandboxLayout(stateDir, id, { legacy: record.version === 2 }), record) : null;
  };

  const adopt = async (id: string): Promise<LocalSandbox | null> => {
    const sandbox = await load(id);
    if (!sandbox || sandbox.expired) return null;
    await sandbox.adopt();
    if (closed) {
      await sandbox.release();
      return null;
    }
    held.set(id, sandbox);
    return sandbox;
  };

  const summarize = async (id: string, now: number): Promise<SandboxSummary> => {
    const layout = sandboxLayout(stateDir, id);
    const record = await readRecord(layout, id).catch(() => null);
    if (!record) {
      const stat = await fsp.stat(layout.dir).catch(() => null);
      return {
        id,
        state: "incomplete",
        labels: {},
        metadata: {},
        createdAt: null,
        expiresAt: null,
        ownerAlive: false,
        alive: false,
        expired: stat ? now - stat.mtimeMs > INCOMPLETE_AFTER_MS : true,
      };
    }
    const alive = record.jail !== null && jailAlive(record.jail);
    const expiresAt = Date.parse(record.expiresAt);
    // A jail that ended because its supervisor was idle: the sandbox is running, dormant.
    const dormant = idleStopMs > 0 && record.state === "running" && record.jail !== null && !alive && expiresAt > now && recordedJailExit(layout.exitStatus) === IDLE_EXIT_CODE;
    return {
      id,
      state: record.state !== "stopped" && !alive && !dormant ? "stopped" : record.state,
      labels: record.labels,
      metadata: record.metadata,
      createdAt: Date.parse(record.createdAt),
      expiresAt,
      ownerAlive: processAlive(record.owner.pid, record.owner.startTime),
      alive,
      expired: expiresAt <= now,
    };
  };

  return {
    stateDir,

    create(createOptions: CreateSandboxOptions): Promise<Sandbox> {
      const run = createOne(createOptions);
      const tracked = run.catch(() => undefined);
      creating.add(tracked);
      void tracked.finally(() => creating.delete(tracked));
      return run;
    },

    async get(id: string): Promise<Sandbox | null> {
      requireOpen();
      checkSandboxId(id);
      const known = held.get(id);
      if (known) {
        if (known.state !== "destroyed" && !known.expired) return known;
        held.delete(id);
        await known.release();
        return null;
      }
      let pending = adopting.get(id);
      if (!pending) {
        pending = adopt(id).finally(() => adopting.delete(id));
        adopting.set(id, pending);
      }
      return pending;
    },

    async list(filter: ListFilter = {}): Promise<SandboxSummary[]> {
      let names: string[];
      try {
        names = await fsp.readdir(sandboxesDir(stateDir));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
      const now = Date.now();
      const wanted = Object.entries(filter.labels ?? {});
      const summaries: SandboxSummary[] = [];
      for (const id of names.filter(isSandboxId).sort()) {
        const summary = await summarize(id, now);
        if (wanted.every(([key, value]) => summary.labels[key] === value)) summaries.push(summary);
      }
      return summaries;
    },

    async summary(id: string): Promise<SandboxSummary | null> {
      checkSandboxId(id);
      if (!fs.existsSync(sandboxLayout(stateDir, id).dir)) return null;
      return summarize(id, Date.now());
    },

    destroy(id: string): Promise<void> {
      const run = destroyOne(id);
      const tracked = run.catch(() => undefined);
      destroying.add(tracked);
      void tracked.finally(() => destroying.delete(tracked));
      return run;
    },

    async close(): Promise<void> {
      closed = true;
      await Promise.allSettled([...adopting.values(), ...creating, ...destroying]);
      const sandboxes = [...held.values()];
      held.clear();
      await Promise.all(sandboxes.map((sandbox) => sandbox.release()));
    },
  };

  async function createOne(createOptions: CreateSandboxOptions): Promise<Sandbox> {
    requireOpen();
    const spec = normalizeCreate(createOptions);
    stateDirReady ??= ensureStateDir(stateDir, { jailUser: hostUser }).catch((error: unknown) => {
      stateDirReady = null;
      throw error;
    });
    await stateDirReady;
    const layout = sandboxLayout(stateDir, spec.id);
    const diskMb = spec.limits.diskMb !== undefined && context.diskProblem === null ? spec.limits.diskMb : null;
    spec.mounts.forEach((mount, index) => {
      const problem = mountPointProblem(mount.path, spec.rootfs ?? undefined);
      if (problem) throw new SandboxInputError(`mounts[${index}].path: ${problem}`);
    });
    try {
      await createSandboxDirs(layout, spec.id, hostUser, diskMb, spec.mounts);
    } catch (error) {
      if (!(error instanceof SandboxExistsError)) await removeSandboxTree(layout).catch(() => undefined);
      throw error;
    }
    const record: SandboxRecord = {
      version: 3,
      id: spec.id,
      state: "stopped",
      createdAt: new Date().toISOString(),
      expiresAt: new Date(spec.expiresAt).toISOString(),
      labels: spec.labels,
      metadata: spec.metadata,
      spec: { rootfs: spec.rootfs, env: spec.env, limits: spec.limits, egress: spec.egress, user: spec.user, mounts: spec.mounts },
      owner: context.owner,
      jail: null,
      cgroups: [],
      freezer: null,
      frozen: null,
    };
    const sandbox = new LocalSandbox(context, layout, record);
    try {
      // Written before the jail starts, so a leak clean-up never sees an anonymous directory.
      await writeRecord(layout, record);
      await sandbox.launch();
    } catch (error) {
      // Nothing of a failed create is left behind.
      await sandbox.destroy().catch(() => undefined);
      throw error;
    }
    held.set(spec.id, sandbox);
    return sandbox;
  }

  async function destroyOne(id: string): Promise<void> {
    checkSandboxId(id);
    // A sandbox this worker does not hold needs no adoption (proxy) just to be destroyed.
    const sandbox = held.get(id) ?? (await adopting.get(id)?.catch(() => null)) ?? (await load(id));
    if (sandbox) {
      await sandbox.destroy();
    } else {
      // No record: a create that died half-way; what it may have made is found by name.
      const layout = sandboxLayout(stateDir, id);
      const left = await removeCgroups(cgroupDirsNamed(layout.cgroupName));
      if (left.length > 0) throw new SandboxStateError(`cgroups of sandbox ${id} could not be removed: ${left.join(", ")}`);
      await removeSandboxTree(layout);
    }
    held.delete(id);
  }
}
