import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { createSerial, GrpcError, GrpcStatus, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { captureDisk, restoreDisk, type Sandbox, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import type { BoxdAccount } from "./options.js";

type MachineStatus = "running" | "suspended" | "hibernated" | "stopped" | "destroying";

const GIB = 1024 ** 3;
/** boxd's size classes: vcpu → memory. */
export const SIZE_CLASSES: ReadonlyMap<number, number> = new Map([
  [1, 4 * GIB],
  [2, 8 * GIB],
  [4, 16 * GIB],
  [8, 32 * GIB],
]);
const DEFAULT_VCPU = 2;
export const DISK_BYTES = 100 * GIB;
const DEFAULT_IMAGE = "ubuntu:24.04";
/** boxd's default auto-hibernate after 4 h idle; auto-suspend is off by default. */
const DEFAULT_AUTO_HIBERNATE_SECS = 4 * 3600;
/** Machine names are DNS labels used in `https://<name>.boxd.sh` (the whole host at most 63). */
const NAME_RULE = /^[a-z0-9](?:[a-z0-9-]{0,53}[a-z0-9])?$/;
/** A backend jail outlives the emulator's own timers by this much (its keeper is the last resort). */
const BACKEND_TTL_MS = 24 * 3600_000;
/** The guest's user: boxd's machines run commands as `boxd`, home /home/boxd. */
export const GUEST_USER = { name: "boxd", home: "/home/boxd" } as const;
const LABEL_KEY = /^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$/;

export interface Machine {
  readonly id: string;
  readonly name: string;
  readonly org: string;
  readonly owner: string;
  readonly imageRef: string;
  readonly restartPolicy: string;
  readonly isolated: boolean;
  readonly createdAt: number;
  readonly labels: Record<string, string>;
  readonly snapshot: string | null;
  vcpu: number;
  memoryBytes: number;
  status: MachineStatus;
  /** The delete timer's deadline (epoch ms on the clock's time line, as the API reports it), or null. */
  destroyAt: number | null;
  legacyAgent: boolean;
  jail: Sandbox;
  autoSuspendSecs: number;
  autoHibernateSecs: number;
}

interface Internals {
  cancelDestroy?: () => void;
  cancelIdle?: () => void;
  /** Commands and uploads in flight (a machine is idle only without any). */
  active: number;
  gone: Promise<void>;
  markGone(): void;
}

export interface CreateSpec {
  account: BoxdAccount;
  name: string;
  imageRef: string;
  restartPolicy: string;
  config: { vcpu: number; memory_bytes: number; disk_bytes: number } | null;
  org: string;
  isolated: boolean;
  labels: Record<string, string>;
  snapshot?: string;
}

export interface SnapshotRecord {
  id: string;
  name: string;
  org: string;
  version: number;
  status: "pending" | "ready" | "failed";
  sizeBytes: number;
  vcpu: number;
  memoryBytes: number;
  dir: string;
}

export interface MachineManagerDeps {
  backend: SandboxBackend;
  clock: VendorClock;
  scratch: string;
  maxMachinesPerOrg: number;
  legacyAgent: boolean;
  log(message: string): void;
}

const fail = (code: number, message: string) => new GrpcError(code, message);

/** boxd's machines, each a backend jail: create, find by id or name, the state machine, timers, snapshots. */
export function createMachineManager(deps: MachineManagerDeps) {
  const machines = new Map<string, Machine>();
  const internals = new WeakMap<Machine, Internals>();
  /** Transitions of one machine run one at a time, in order. */
  const queue = createSerial();
  const snapshots = new Map<string, SnapshotRecord>();
  let closing = false;

  const inner = (m: Machine) => internals.get(m)!;
  const orgOf = (account: BoxdAccount, org: string) => {
    if (org && org !== account.org) throw fail(GrpcStatus.PERMISSION_DENIED, `this API key is fenced to org ${account.org}, not ${org}`);
    return account.org;
  };
  const inOrg = (org: string) => [...machines.values()].filter((m) => m.org === org);

  /** Runs `fn` after the machine's earlier transitions. */
  const serial = <T>(m: Machine, fn: () => Promise<T>): Promise<T> => queue(m.id, fn);

  function sizeOf(config: CreateSpec["config"]): { vcpu: number; memoryBytes: number } {
    const vcpu = config?.vcpu || DEFAULT_VCPU;
    const memoryBytes = SIZE_CLASSES.get(vcpu);
    if (memoryBytes === undefined) throw fail(GrpcStatus.INVALID_ARGUMENT, `config.vcpu: ${vcpu} is not a size class (1, 2, 4 or 8)`);
    const asked = Number(config?.memory_bytes ?? 0);
    if (asked !== 0 && asked !== memoryBytes) throw fail(GrpcStatus.INVALID_ARGUMENT, `config.memory_bytes: ${asked} does not match the ${vcpu}-vcpu size class (${memoryBytes})`);
    const disk = Number(config?.disk_bytes ?? 0);
    if (disk !== 0 && disk !== DISK_BYTES) throw fail(GrpcStatus.INVALID_ARGUMENT, `config.disk_bytes: must be 0 or ${DISK_BYTES} (the disk is a fixed 100 GiB)`);
    return { vcpu, memoryBytes };
  }

  function checkLabels(labels: Record<string, string>): void {
    if (Object.keys(labels).length > 64) throw fail(GrpcStatus.INVALID_ARGUMENT, "labels: at most 64");
    for (const [key, value] of Object.entries(labels)) {
      if (!LABEL_KEY.test(key)) throw fail(GrpcStatus.INVALID_ARGUMENT, `labels: key ${JSON.stringify(key)} must be 1-63 of a-z 0-9 . _ / -, starting and ending alphanumeric`);
      if (value.length > 256) throw fail(GrpcStatus.INVALID_ARGUMENT, `labels.${key}: at most 256 characters`);
    }
  }

  async function create(spec: CreateSpec): Promise<Machine> {
    if (closing) throw fail(GrpcStatus.UNAVAILABLE, "boxd is shutting down");
    const org = orgOf(spec.account, spec.org);
    const name = spec.name || `vm-${randomBytes(4).toString("hex")}`;
    if (!NAME_RULE.test(name)) throw fail(GrpcStatus.INVALID_ARGUMENT, `name ${JSON.stringify(name)}: must be a DNS label of at most 55 lowercase letters, digits and dashes`);
    checkLabels(spec.labels);
    if (spec.restartPolicy && spec.restartPolicy !== "always" && spec.restartPolicy !== "never") {
      throw fail(GrpcStatus.INVALID_ARGUMENT, `restart_policy: must be "always" or "never"`);
    }
    let size: { vcpu: number; memoryBytes: number };
    let source: SnapshotRecord | undefined;
    if (spec.snapshot !== undefined) {
      source = snapshots.get(`${org}/${spec.snapshot}`);
      if (!source) throw fail(GrpcStatus.NOT_FOUND, `snapshot ${spec.snapshot} not found`);
      if (source.status !== "ready") throw fail(GrpcStatus.FAILED_PRECONDITION, `snapshot ${spec.snapshot} is ${source.status}`);
      // A restore keeps the snapshot's size.
      if (spec.config?.vcpu && spec.config.vcpu !== source.vcpu) {
        throw fail(GrpcStatus.INVALID_ARGUMENT, `config.vcpu: a machine restored from a snapshot keeps its size (${source.vcpu} vcpu)`);
      }
      size = { vcpu: source.vcpu, memoryBytes: source.memoryBytes };
    } else {
      size = sizeOf(spec.config);
    }
    if (inOrg(org).some((m) => m.name === name && m.status !== "destroying")) throw fail(GrpcStatus.ALREADY_EXISTS, `a machine named ${name} already exists`);
    if (inOrg(org).filter((m) => m.status !== "destroying").length >= deps.maxMachinesPerOrg)
      throw fail(GrpcStatus.RESOURCE_EXHAUSTED, `org ${org} has reached its quota of ${deps.maxMachinesPerOrg} machines`);

    const id = randomUUID();
    const started = deps.clock.now();
    const jail = await deps.backend.create({
      id,
      ttlMs: BACKEND_TTL_MS,
      limits: { cpu: size.vcpu, memoryMb: Math.floor(size.memoryBytes / 1024 ** 2) },
      labels: { "boxd-org": org },
      user: GUEST_USER,
    });
    try {
      if (source) await restoreDisk(source.dir, jail);
    } catch (error) {
      await deps.backend.destroy(id).catch(() => undefined);
      throw fail(GrpcStatus.INTERNAL, `restoring snapshot ${source!.name} failed: ${(error as Error).message}`);
    }
    let markGone!: () => void;
    const gone = new Promise<void>((resolve) => (markGone = resolve));
    const machine: Machine = {
      id,
      name,
      org,
      owner: spec.account.userId,
      imageRef: spec.imageRef || DEFAULT_IMAGE,
      restartPolicy: spec.restartPolicy || "never",
      isolated: spec.isolated,
      createdAt: started,
      labels: { ...spec.labels },
      snapshot: source?.name ?? null,
      vcpu: size.vcpu,
      memoryBytes: size.memoryBytes,
      status: "running",
      destroyAt: null,
      legacyAgent: deps.legacyAgent,
      jail,
      autoSuspendSecs: 0,
      autoHibernateSecs: DEFAULT_AUTO_HIBERNATE_SECS,
    };
    internals.set(machine, { active: 0, gone, markGone });
    machines.set(id, machine);
    armIdle(machine);
    return machine;
  }

  /** A machine of the account's org by id or name; NOT_FOUND for unknown, another org's, or gone. */
  function find(account: BoxdAccount, idOrName: string): Machine {
    if (!idOrName) throw fail(GrpcStatus.INVALID_ARGUMENT, "vm_id: required");
    const byId = machines.get(idOrName);
    const found = byId && byId.org === account.org ? byId : inOrg(account.org).find((m) => m.name === idOrName);
    if (!found) throw fail(GrpcStatus.NOT_FOUND, `machine ${idOrName} not found`);
    return found;
  }

  function list(account: BoxdAccount, org: string, labels: Record<string, string>): Machine[] {
    const own = orgOf(account, org);
    return inOrg(own)
      .filter((m) => Object.entries(labels).every(([k, v]) => m.labels[k] === v))
      .sort((a, b) => a.createdAt - b.createdAt);
  }

  /** Destroy answers at once; the machine is listed as `destroying` until its jail is gone. */
  function destroy(m: Machine): void {
    if (m.status === "destroying") return;
    m.status = "destroying";
    const i = inner(m);
    i.cancelDestroy?.();
    i.cancelIdle?.();
    void serial(m, async () => {
      try {
        await deps.backend.destroy(m.id);
      } catch (error) {
        deps.log(`boxd emulator: destroying machine ${m.id} failed: ${(error as Error).message}`);
      }
      machines.delete(m.id);
      i.markGone();
    });
  }

  const notDestroying = (m: Machine) => {
    if (m.status === "destroying") throw fail(GrpcStatus.NOT_FOUND, `machine ${m.id} is being destroyed`);
  };

  function stop(m: Machine): Promise<void> {
    return serial(m, async () => {
      notDestroying(m);
      if (m.status === "stopped") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is already stopped`);
      // A cold stop: every process ends (a frozen jail is thawed by the backend first), the disk stays.
      await m.jail.stop();
      m.status = "stopped";
      inner(m).cancelIdle?.();
    });
  }

  function start(m: Machine): Promise<void> {
    return serial(m, async () => {
      notDestroying(m);
      if (m.status !== "stopped") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is ${m.status}, not stopped`);
      await m.jail.start();
      m.status = "running";
      armIdle(m);
    });
  }

  /** Warm pause: the backend's freeze (memory and processes kept). Returns the µs it took. */
  function suspend(m: Machine, to: "suspended" | "hibernated"): Promise<number> {
    return serial(m, async () => {
      notDestroying(m);
      if (m.status === "stopped") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is stopped`);
      if (m.status === "hibernated" && to === "suspended") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is hibernated`);
      const t0 = process.hrtime.bigint();
      if (m.status === "running") await m.jail.freeze();
      m.status = to;
      inner(m).cancelIdle?.();
      return Number((process.hrtime.bigint() - t0) / 1000n);
    });
  }

  /** Suspended or hibernated → running (thaw). `strict`: ResumeVm refuses a stopped machine. */
  function resume(m: Machine): Promise<number> {
    return serial(m, async () => {
      notDestroying(m);
      if (m.status === "stopped") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is stopped (StartVm starts it)`);
      const t0 = process.hrtime.bigint();
      if (m.status !== "running") {
        await m.jail.thaw();
        m.status = "running";
        armIdle(m);
      }
      return Number((process.hrtime.bigint() - t0) / 1000n);
    });
  }

  /**
   * The machine's jail ready for a command or an upload: a suspended or hibernated machine wakes,
   * a stopped one is refused (FAILED_PRECONDITION, as boxd answers). Counts as activity until `done`.
   */
  async function use(m: Machine): Promise<{ jail: Sandbox; done(): void }> {
    await serial(m, async () => {
      notDestroying(m);
      if (m.status === "stopped") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is stopped`);
      if (m.status !== "running") {
        await m.jail.thaw();
        m.status = "running";
      }
    });
    const i = inner(m);
    i.active += 1;
    i.cancelIdle?.();
    let done = false;
    return {
      jail: m.jail,
      done() {
        if (done) return;
        done = true;
        i.active -= 1;
        armIdle(m);
      },
    };
  }

  /** The delete timer: destroyed `secs` of boxd time from now; 0 turns it off. */
  function setAutoDestroy(m: Machine, secs: number): void {
    notDestroying(m);
    const i = inner(m);
    i.cancelDestroy?.();
    i.cancelDestroy = undefined;
    m.destroyAt = null;
    if (secs <= 0) return;
    const when = deps.clock.now() + deps.clock.duration(secs * 1000);
    m.destroyAt = when;
    i.cancelDestroy = deps.clock.at(when, () => destroy(m));
    // The jail's own keeper ends it then too, even if this emulator is gone.
    void m.jail.extendTtl(deps.clock.realDeadline(when) + 60_000).catch(() => undefined);
  }

  function setIdleTimeout(m: Machine, kind: "suspend" | "hibernate", secs: number): void {
    notDestroying(m);
    if (kind === "suspend") m.autoSuspendSecs = secs;
    else m.autoHibernateSecs = secs;
    armIdle(m);
  }

  /** Idle (no command or upload in flight) running machines suspend / hibernate on their timers. */
  function armIdle(m: Machine): void {
    const i = inner(m);
    i.cancelIdle?.();
    i.cancelIdle = undefined;
    if (m.status !== "running" || i.active > 0) return;
    const timers = [
      { secs: m.autoSuspendSecs, to: "suspended" as const },
      { secs: m.autoHibernateSecs, to: "hibernated" as const },
    ].filter((t) => t.secs > 0);
    if (timers.length === 0) return;
    const first = timers.reduce((a, b) => (b.secs < a.secs ? b : a));
    i.cancelIdle = deps.clock.after(first.secs * 1000, () => void suspend(m, first.to).catch(() => undefined));
  }

  async function resize(m: Machine, vcpu: number, memoryBytes: number): Promise<{ rebooted: boolean }> {
    const size = sizeOf({ vcpu: vcpu || (memoryBytes ? ([...SIZE_CLASSES].find(([, mem]) => mem === memoryBytes)?.[0] ?? -1) : m.vcpu), memory_bytes: memoryBytes, disk_bytes: 0 });
    return serial(m, async () => {
      notDestroying(m);
      if (m.status === "suspended" || m.status === "hibernated") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} is ${m.status}`);
      if (size.vcpu === m.vcpu) return { rebooted: false };
      const running = m.status === "running";
      // A resize is a cold reboot of a running machine (the backend's limits are set when a jail starts).
      if (running) await m.jail.stop();
      m.vcpu = size.vcpu;
      m.memoryBytes = size.memoryBytes;
      if (running) await m.jail.start();
      return { rebooted: running };
    });
  }

  async function createSnapshot(account: BoxdAccount, m: Machine, name: string): Promise<SnapshotRecord> {
    if (!NAME_RULE.test(name)) throw fail(GrpcStatus.INVALID_ARGUMENT, `name ${JSON.stringify(name)}: must be a DNS label`);
    if (m.status !== "running") throw fail(GrpcStatus.FAILED_PRECONDITION, `machine ${m.name} must be running to snapshot (it is ${m.status})`);
    const key = `${account.org}/${name}`;
    const previous = snapshots.get(key);
    const record: SnapshotRecord = {
      id: randomUUID(),
      name,
      org: account.org,
      version: (previous?.version ?? 0) + 1,
      status: "pending",
      sizeBytes: 0,
      vcpu: m.vcpu,
      memoryBytes: m.memoryBytes,
      dir: join(deps.scratch, "snapshots", randomUUID()),
    };
    snapshots.set(key, record);
    // Latest-only: saving again replaces the earlier version once the capture is stored.
    void serial(m, async () => {
      try {
        await mkdir(join(deps.scratch, "snapshots"), { recursive: true, mode: 0o700 });
        record.sizeBytes = await captureDisk(m.jail, record.dir);
        // Deleted (or saved again) while it was being copied: the copy is nobody's.
        if (snapshots.get(key) !== record) return await rm(record.dir, { recursive: true, force: true });
        record.status = "ready";
        if (previous) await rm(previous.dir, { recursive: true, force: true });
      } catch (error) {
        record.status = "failed";
        deps.log(`boxd emulator: snapshot ${name} of ${m.id} failed: ${(error as Error).message}`);
      }
    });
    return record;
  }

  function getSnapshot(account: BoxdAccount, name: string, org: string): SnapshotRecord {
    const found = snapshots.get(`${orgOf(account, org)}/${name}`);
    if (!found) throw fail(GrpcStatus.NOT_FOUND, `snapshot ${name} not found`);
    return found;
  }

  /** The org's snapshots (each name's latest version, pending and failed ones too), by name. */
  function listSnapshots(account: BoxdAccount, org: string): SnapshotRecord[] {
    const own = orgOf(account, org);
    return [...snapshots.values()].filter((s) => s.org === own).sort((a, b) => a.name.localeCompare(b.name));
  }

  async function deleteSnapshot(account: BoxdAccount, name: string, org: string): Promise<void> {
    const found = getSnapshot(account, name, org);
    snapshots.delete(`${found.org}/${found.name}`);
    await rm(found.dir, { recursive: true, force: true });
  }

  return {
    create,
    find,
    list,
    destroy,
    stop,
    start,
    suspend,
    resume,
    use,
    setAutoDestroy,
    setIdleTimeout,
    resize,
    createSnapshot,
    getSnapshot,
    listSnapshots,
    deleteSnapshot,
    all: () => [...machines.values()],
    byId: (id: string) => machines.get(id),
    snapshots: () => [...snapshots.values()],
    async close(): Promise<void> {
      closing = true;
      for (const m of machines.values()) destroy(m);
      await Promise.all([...machines.values()].map((m) => inner(m).gone));
      for (const s of snapshots.values()) await rm(s.dir, { recursive: true, force: true });
      snapshots.clear();
    },
  };
}

export type MachineManager = ReturnType<typeof createMachineManager>;
