import { randomUUID } from "node:crypto";
import { createSerial, HttpError, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { restoreDisk, SANDBOX_USER, type Sandbox as Jail, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import type { ResolvedOptions } from "./options.js";
import { DISK_STATES, RUNNING_STATES, type SandboxRecord, type SandboxState } from "./records.js";
import type { SnapshotStore } from "./snapshot-routes.js";

/** What `POST /sandbox` may ask for (the fields of `CreateSandbox` this emulator honours). */
export interface CreateRequest {
  name?: string;
  snapshot?: string;
  dockerfile?: string;
  user?: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  target?: string;
  cpu?: number;
  gpu?: number;
  memory?: number;
  disk?: number;
  autoStopInterval?: number;
  autoPauseInterval?: number;
  autoArchiveInterval?: number;
  autoDeleteInterval?: number;
  ttlMinutes?: number;
  public?: boolean;
}

/** Daytona's defaults for a sandbox without resources (cores, GiB, GiB) and for the intervals (minutes). */
const DEFAULTS = { cpu: 1, memory: 1, disk: 3, autoStopInterval: 15, autoArchiveInterval: 7 * 24 * 60, autoDeleteInterval: -1 };
/** What an auto-archive interval of 0 means ("the maximum interval"). */
const MAX_ARCHIVE_MINUTES = 30 * 24 * 60;
const MINUTE = 60_000;

/** A state change as the notification gateway announces it. */
export type FleetEvent = { kind: "created"; record: SandboxRecord } | { kind: "state"; record: SandboxRecord; oldState: SandboxState; newState: SandboxState };

export interface Fleet {
  create(request: CreateRequest): Promise<SandboxRecord>;
  /** By id, then by name; undefined when there is none (or it is destroyed). */
  find(idOrName: string): SandboxRecord | undefined;
  all(): SandboxRecord[];
  start(record: SandboxRecord): Promise<void>;
  stop(record: SandboxRecord): Promise<void>;
  pause(record: SandboxRecord): Promise<void>;
  archive(record: SandboxRecord): Promise<void>;
  remove(record: SandboxRecord): Promise<void>;
  /** `resize`: cpu and memory of a started or stopped sandbox, disk only stopped (only up). */
  resize(record: SandboxRecord, to: { cpu?: number; memory?: number; disk?: number }): Promise<void>;
  /** `createSandboxSnapshot`: `work` copies the jail while the sandbox is `snapshotting`; then it returns to its state. */
  snapshot(record: SandboxRecord, work: (jail: Jail) => Promise<void>): Promise<void>;
  /** The sandbox was used (toolbox call, API action): the auto-stop clock restarts. */
  touch(record: SandboxRecord): void;
  /** Applies the auto-stop/pause/archive/delete intervals and TTLs due now. */
  sweep(): Promise<void>;
  /** Every created sandbox and state change, for the notification gateway. */
  onEvent(listener: (event: FleetEvent) => void): () => void;
  readonly clock: VendorClock;
  close(): Promise<void>;
}

/**
 * The control plane's sandboxes and their state machine, each sandbox a backend jail. State changes
 * take `transitionMs` in their transitional state (0: the call answers in the final state); one
 * change at a time per sandbox (another answers 409). Intervals run on the vendor clock.
 */
export function createFleet(backend: SandboxBackend, options: ResolvedOptions, clock: VendorClock, snapshots: SnapshotStore): Fleet {
  const records = new Map<string, SandboxRecord>();
  const listeners = new Set<(event: FleetEvent) => void>();
  const serial = createSerial();
  const minutes = (value: number) => clock.duration(value * MINUTE);
  let closed = false;
  // The sweep under way (it may be stopping or removing a sandbox): close waits for it before the jails' directory goes.
  let sweeping: Promise<void> = Promise.resolve();

  const emit = (event: FleetEvent) => {
    for (const listener of listeners) listener(event);
  };
  const setState = (record: SandboxRecord, state: SandboxState) => {
    const oldState = record.state;
    record.state = state;
    record.updatedAt = clock.now();
    if (oldState !== state) emit({ kind: "state", record, oldState, newState: state });
  };

  /** Runs a state change: the transitional state while `work` runs (and `transitionMs` more), then the final one. */
  const transition = async (record: SandboxRecord, during: SandboxState, after: SandboxState, work: () => Promise<void>) => {
    if (serial.busy(record.id)) throw new HttpError(409, "Sandbox state change in progress");
    setState(record, during);
    const run = serial(record.id, async () => {
      try {
        await work();
        if (options.transitionMs > 0) await clock.sleep(options.transitionMs);
        if (record.state === during) setState(record, after);
        // A sandbox that has just (re)started is active: the auto-stop/pause idle time counts from here.
        if (after === "started") record.lastActivityAt = clock.now();
      } catch (error) {
        record.errorReason = error instanceof Error ? error.message : String(error);
        setState(record, "error");
      } finally {
        record.pending = undefined;
      }
    });
    record.pending = run;
    if (options.transitionMs === 0) await run;
  };

  const checkQuota = (adding: { cpu: number; memory: number; disk: number }, except?: SandboxRecord) => {
    let cpu = adding.cpu;
    let memory = adding.memory;
    let disk = adding.disk;
    for (const record of records.values()) {
      if (record === except) continue;
      if (RUNNING_STATES.has(record.state)) {
        cpu += record.cpu;
        memory += record.memory;
      }
      if (DISK_STATES.has(record.state)) disk += record.disk;
    }
    // Daytona answers quota problems with 400 and these sentences (server v0.190).
    if (cpu > options.quota.cpu) throw new HttpError(400, `Total CPU limit exceeded. Maximum allowed: ${options.quota.cpu}.`);
    if (memory > options.quota.memory) throw new HttpError(400, `Total memory limit exceeded. Maximum allowed: ${options.quota.memory}GiB.`);
    if (disk > options.quota.disk) throw new HttpError(400, `Total disk limit exceeded. Maximum allowed: ${options.quota.disk}GiB.`);
  };

  const jailDeadline = (record: SandboxRecord) =>
    Math.min(Date.now() + options.maxLifetimeMs, record.autoDestroyAt === undefined ? Number.POSITIVE_INFINITY : clock.realDeadline(record.autoDestroyAt) + 1_000);

  const launch = async (record: SandboxRecord) => {
    const jail = await backend.create({
      id: record.id,
      env: record.env,
      limits: { cpu: record.cpu, memoryMb: record.memory * 1024 },
      expiresAt: Math.max(Date.now() + 1_000, jailDeadline(record)),
      labels: { "daytona-sandbox": record.id },
    });
    record.jail = jail;
    // A sandbox made from a sandbox's snapshot starts with that snapshot's disk, before anything runs in it.
    const disk = record.boots === 0 && record.snapshot !== undefined ? snapshots.diskOf(record.snapshot) : undefined;
    if (disk !== undefined) await restoreDisk(disk, jail);
    record.boots += 1;
  };

  const busyAnswer = (record: SandboxRecord, wrongState: string) => new HttpError(record.pending ? 409 : 400, record.pending ? "Sandbox state change in progress" : wrongState);

  const fleet: Fleet = {
    clock,
    async create(request) {
      if (closed) throw new HttpError(503, "the emulator is shutting down");
      if (request.snapshot !== undefined && (options.snapshots || snapshots.diskOf(request.snapshot) !== undefined) && !snapshots.exists(request.snapshot)) {
        throw new HttpError(404, `Snapshot ${request.snapshot} not found`);
      }
      const name = request.name ?? undefined;
      if (name !== undefined && [...records.values()].some((r) => r.name === name)) throw new HttpError(409, `Sandbox with name ${name} already exists`);
      if ((request.autoStopInterval ?? 0) > 0 && (request.autoPauseInterval ?? 0) > 0) {
        throw new HttpError(400, "autoStopInterval and autoPauseInterval cannot both be set");
      }
      const cpu = request.cpu ?? DEFAULTS.cpu;
      const memory = request.memory ?? DEFAULTS.memory;
      const disk = request.disk ?? DEFAULTS.disk;
      checkQuota({ cpu, memory, disk });
      const now = clock.now();
      const id = randomUUID();
      const ttl = request.ttlMinutes ?? 0;
      const autoPauseInterval = request.autoPauseInterval ?? 0;
      const record: SandboxRecord = {
        id,
        name: name ?? id,
        organizationId: options.organizationId,
        snapshot: request.dockerfile === undefined ? (request.snapshot ?? "daytonaio/sandbox:emulator") : undefined,
        dockerfile: request.dockerfile,
        user: SANDBOX_USER,
        env: request.env,
        labels: request.labels,
        target: request.target ?? "us",
        cpu,
        gpu: request.gpu ?? 0,
        memory,
        disk,
        state: "creating",
        errorReason: undefined,
        autoStopInterval: autoPauseInterval > 0 ? 0 : (request.autoStopInterval ?? DEFAULTS.autoStopInterval),
        autoPauseInterval,
        public: request.public ?? false,
        autoArchiveInterval: request.autoArchiveInterval ?? DEFAULTS.autoArchiveInterval,
        autoDeleteInterval: request.autoDeleteInterval ?? DEFAULTS.autoDeleteInterval,
        autoDestroyAt: ttl > 0 ? now + minutes(ttl) : undefined,
        createdAt: now,
        jailBornAt: Date.now(),
        updatedAt: now,
        lastActivityAt: now,
        stoppedAt: undefined,
        activeRequests: 0,
        pending: undefined,
        jail: undefined,
        boots: 0,
      };
      records.set(id, record);
      emit({ kind: "created", record });
      await transition(record, "creating", "started", () => launch(record));
      return record;
    },

    find(idOrName) {
      const byId = records.get(idOrName);
      if (byId) return byId;
      return [...records.values()].find((record) => record.name === idOrName);
    },

    all: () => [...records.values()],

    async start(record) {
      fleet.touch(record);
      if (record.state === "started") return;
      if (record.state === "paused") {
        // Start on a paused sandbox resumes it: the frozen jail thaws with its processes.
        await transition(record, "resuming", "started", async () => {
          await record.jail?.thaw();
        });
        return;
      }
      if (record.state !== "stopped" && record.state !== "archived") throw busyAnswer(record, `Sandbox is not in a startable state (${record.state})`);
      checkQuota({ cpu: record.cpu, memory: record.memory, disk: record.state === "archived" ? record.disk : 0 }, record);
      const during = record.state === "archived" ? "restoring" : "starting";
      await transition(record, during, "started", async () => {
        if (record.jail) {
          await record.jail.start();
          record.boots += 1;
        } else await launch(record);
        record.stoppedAt = undefined;
      });
    },

    async stop(record) {
      fleet.touch(record);
      if (record.state !== "started" && record.state !== "paused") throw busyAnswer(record, "Sandbox is not in a stoppable state");
      // An ephemeral sandbox (auto-delete 0) is deleted when it stops.
      if (record.autoDeleteInterval === 0) return fleet.remove(record);
      await transition(record, "stopping", "stopped", async () => {
        if (record.jail?.state === "frozen") await record.jail.thaw();
        await record.jail?.stop();
        record.stoppedAt = clock.now();
      });
    },

    async pause(record) {
      fleet.touch(record);
      if (record.state === "paused") return;
      if (record.state !== "started") throw busyAnswer(record, "Sandbox is not in a pausable state");
      await transition(record, "pausing", "paused", async () => {
        await record.jail?.freeze();
        record.stoppedAt = clock.now();
      });
    },

    async archive(record) {
      if (record.state === "archived") return;
      if (record.state !== "stopped") throw busyAnswer(record, "Sandbox is not stopped");
      // The backend jail stays stopped with its files: "restoring" brings the same disk back.
      await transition(record, "archiving", "archived", async () => undefined);
    },

    async remove(record) {
      if (record.state === "destroying" || record.state === "destroyed") return;
      if (record.pending) await record.pending.catch(() => undefined);
      await serial.idle();
      await transition(record, "destroying", "destroyed", async () => {
        await backend.destroy(record.id);
        record.jail = undefined;
      });
      const forget = () => {
        if (record.state === "destroyed") records.delete(record.id);
      };
      if (record.pending) void record.pending.then(forget);
      else forget();
    },

    async resize(record, to) {
      if (record.state !== "started" && record.state !== "stopped") throw busyAnswer(record, "Sandbox must be started or stopped to resize");
      if (to.disk !== undefined && record.state !== "stopped") throw new HttpError(400, "Disk can only be resized on a stopped sandbox");
      if (to.disk !== undefined && to.disk < record.disk) throw new HttpError(400, "Disk size can only be increased");
      const next = { cpu: to.cpu ?? record.cpu, memory: to.memory ?? record.memory, disk: to.disk ?? record.disk };
      checkQuota(record.state === "started" ? next : { cpu: 0, memory: 0, disk: next.disk }, record);
      const back = record.state;
      await transition(record, "resizing", back, async () => {
        // Cgroup limits are set when a jail starts: a started sandbox keeps its running limits until its next boot.
        Object.assign(record, next);
      });
    },

    async snapshot(record, work) {
      fleet.touch(record);
      if (record.state !== "started" && record.state !== "stopped") throw busyAnswer(record, `Sandbox must be started or stopped to snapshot (it is ${record.state})`);
      const jail = record.jail;
      if (!jail) throw new HttpError(400, "Sandbox has no disk to snapshot");
      await transition(record, "snapshotting", record.state, () => work(jail));
    },

    touch(record) {
      record.lastActivityAt = clock.now();
    },

    sweep() {
      const run = sweeping.then(sweepOnce);
      sweeping = run.catch(() => undefined);
      return run;
    },

    onEvent(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },

    async close() {
      closed = true;
      await sweeping;
      await Promise.all([...records.values()].map((record) => record.pending?.catch(() => undefined)));
      for (const record of records.values()) await backend.destroy(record.id).catch(() => undefined);
      records.clear();
      listeners.clear();
    },
  };

  async function sweepOnce(): Promise<void> {
    const now = clock.now();
    for (const record of [...records.values()]) {
      if (record.pending || closed) continue;
      const due = (from: number | undefined, interval: number) => from !== undefined && now - from >= minutes(interval);
      try {
        if (record.autoDestroyAt !== undefined && now >= record.autoDestroyAt) await fleet.remove(record);
        else if (record.state === "started" && record.autoStopInterval > 0 && record.activeRequests === 0 && due(record.lastActivityAt, record.autoStopInterval)) await fleet.stop(record);
        else if (record.state === "started" && record.autoPauseInterval > 0 && record.activeRequests === 0 && due(record.lastActivityAt, record.autoPauseInterval)) await fleet.pause(record);
        else if ((record.state === "stopped" || record.state === "archived") && record.autoDeleteInterval > 0 && due(record.stoppedAt, record.autoDeleteInterval)) await fleet.remove(record);
        else if (record.state === "stopped" && due(record.stoppedAt, record.autoArchiveInterval || MAX_ARCHIVE_MINUTES)) await fleet.archive(record);
      } catch {
        // A sandbox busy with another change is swept on a later tick.
      }
      // The real-time bound on any jail, whatever the vendor clock says (a crashed emulator leaks nothing for long).
      if (Date.now() - record.jailBornAt >= options.maxLifetimeMs) await fleet.remove(record).catch(() => undefined);
    }
  }
  return fleet;
}
