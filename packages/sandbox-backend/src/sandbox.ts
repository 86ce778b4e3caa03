/**
 * One sandbox as this worker holds it: its record, its jail's lifecycle (launch, cold stop/start,
 * warm freeze/thaw, a movable expiry, destroy with confirmation) and its handles (egress proxy,
 * supervisor channel). Lifecycle operations of one sandbox run one at a time.
 *
 * Dormancy (with `idleStopMs`): a supervisor with nothing to do for that long exits, and its jail
 * ends with it (supervisor/in-jail/idle.mts): an idle sandbox holds no process and no memory. The
 * sandbox stays "running" ("dormant": its keeper recorded the idle exit status) and the next call
 * starts a fresh jail on the same disk first. Nothing is lost: the supervisor goes only when no
 * process but its own runs and /dev/shm is empty. To never send a request into a supervisor that is
 * just exiting, a call made more than `idleStopMs - IDLE_MARGIN_MS` after the last proof of life
 * (a call it answered, counted from when that call began) first pings it: an answered ping restarts
 * its idle clock, an unanswered one means it went (then the jail is started again).
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import { isZombieOrGone, type ScriptRunner } from "@paperclip-sandbox/kit";
import { SandboxError, SandboxGoneError, SandboxInputError, SandboxStateError } from "./errors.js";
import { startEgressProxy, type EgressDenial, type EgressProxy } from "./egress/proxy.js";
import type { Resolver } from "./egress/resolver.js";
import { buildJailArgv, generatedEtcFiles, SANDBOX_PATHS, supervisorNode } from "./jail/argv.js";
import type { JailRuntime, UnenforcedProtection } from "./jail/runtime.js";
import { GUARDED_PID_MAX } from "./jail/seccomp.js";
import { cgroupDirsNamed, createSandboxCgroups, removeCgroups, type LimitName } from "./jail/cgroups.js";
import { freezeBySignals, freezeCgroup, thawBySignals, thawCgroup, thawWrite } from "./jail/freeze.js";
import { wakeKeeper, writeDeadline } from "./jail/keeper.js";
import { JAIL_FDS, jailAlive, launchJail, recordedJailExit, stopJail, type JailRecord, type LaunchedJail } from "./jail/process.js";
import { EGRESS_PROXY_PORT, grantIsEmpty, sandboxBaseEnv } from "./jail/sandbox-env.js";
import { checkExecOptions, checkExpiry, checkLabels, checkMetadata } from "./options.js";
import { mountDirOf, type SandboxLayout } from "./store/layout.js";
import { writeRecord, type SandboxRecord } from "./store/record.js";
import { removeSandboxTree } from "./store/state-dir.js";
import { isMountPoint, mountDisk } from "./store/disk.js";
import { processAlive } from "./store/proc.js";
import { readFileNoFollow } from "./store/no-follow-read.js";
import { SupervisorClient } from "./supervisor/client.js";
import { request, SupervisorTransportError } from "./supervisor/connection.js";
import type { SupervisorChannel } from "./supervisor/connection.js";
import { attachExec, listProcesses, reapProcess, startExec } from "./supervisor/exec-client.js";
import { createFilesClient } from "./supervisor/files-client.js";
import type { EgressSpec, ExecHandle, ExecOptions, ProcessInfo, Sandbox, SandboxFiles, SandboxLimits, SandboxPaths, SandboxState } from "./types.js";

/** What every sandbox of one backend shares. */
export interface SandboxContext {
  bwrapPath: string;
  runtime: JailRuntime;
  nodeBinary: string;
  resolver: Resolver & { pinned?(host: string): boolean };
  freezer: "auto" | "signal";
  owner: SandboxRecord["owner"];
  /** Why this worker cannot give a sandbox a disk of its own; null when it can. */
  diskProblem: string | null;
  /** A supervisor idle this long exits, ending its jail until the next call (see above); 0: never. */
  idleStopMs: number;
}

/** The supervisor's exit status for "idle" (supervisor/in-jail/idle.mts). */
export const IDLE_EXIT_CODE = 75;
/** How long a transport failure's report waits for the keeper to record the jail's exit status. */
const JAIL_EXIT_REPORT_WAIT_MS = 5_000;
/** Below `idleStopMs`, how recent the last proof of life must be for a call to skip the ping. */
const IDLE_MARGIN_MS = 1_000;

const MAX_DENIALS = 100;
/** /dev/shm of a sandbox without a memory limit (Docker's default size). */
export const DEFAULT_SHM_BYTES = 64 * 1024 * 1024;

/** /dev/shm is a tmpfs whose pages count against the memory limit: half of it (as the kernel sizes tmpfs by RAM), else the default. */
function shmBytesFor(limits: SandboxLimits): number {
  return limits.memoryMb !== undefined ? Math.max(1, Math.floor(limits.memoryMb / 2)) * 1024 * 1024 : DEFAULT_SHM_BYTES;
}

export class LocalSandbox implements Sandbox {
  readonly id: string;
  readonly paths: SandboxPaths;
  readonly files: SandboxFiles;
  readonly runner: ScriptRunner;
  unenforcedLimits: Array<{ limit: LimitName; reason: string }> = [];
  unenforcedProtections: UnenforcedProtection[] = [];
  private readonly channel: SupervisorChannel;
  private proxy: EgressProxy | null = null;
  private launched: LaunchedJail | null = null;
  private readonly goneListeners = new Set<(error: Error) => void>();
  private readonly openHandles = new Set<ExecHandle>();
  private readonly denialLog: EgressDenial[] = [];
  private destroyed = false;
  /** performance.now() when the newest call the supervisor answered began (or the jail was launched). */
  private lastContact = Number.NEGATIVE_INFINITY;
  private waking: Promise<void> | null = null;
  /** Set when this worker has let go of the sandbox (backend.close): the jail runs on without it. */
  private released = false;
  /** A stop, start or destroy of this handle is ending the jail: a connection lost meanwhile is expected. */
  private endingJail = false;
  /** Set when the supervisor broke the protocol: its jail was ended, and stays so until start(). */
  private violation: Error | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private transportReports = 0;

  constructor(
    private readonly context: SandboxContext,
    private readonly layout: SandboxLayout,
    private record: SandboxRecord,
  ) {
    this.id = record.id;
    this.paths = { dir: layout.dir, workspace: layout.workspace, home: layout.home, cache: layout.cache, tmp: layout.tmp, log: layout.log };
    this.channel = {
      socketPath: layout.socket,
      // A command sent before the supervisor accepts waits in the backlog: stop waiting if the jail dies.
      watchJail: (onGone) => {
        this.goneListeners.add(onGone);
        return () => this.goneListeners.delete(onGone);
      },
      onViolation: (error) => this.endForViolation(error),
    };
    const client = new SupervisorClient(this.channel);
    this.runner = { capabilities: client.capabilities, run: (script, io) => this.answered(() => client.run(script, io)) };
    this.files = createFilesClient(this.channel, async () => {
      await this.ensureAwake();
      this.requireRunning();
    });
  }

  get state(): SandboxState | "destroyed" {
    if (this.destroyed) return "destroyed";
    if (this.record.state !== "stopped" && !this.jailRunning() && !this.dormant()) return "stopped";
    return this.record.state;
  }

  /**
   * Its jail ended because its supervisor was idle; the next call starts a fresh one. (Also while a
   * jail that just ended waits for its keeper to record why: idle, most likely.)
   */
  dormant(): boolean {
    const jail = this.record.jail;
    if (this.record.state !== "running" || jail === null || this.expired || this.context.idleStopMs <= 0 || jailAlive(jail)) return false;
    const recorded = recordedJailExit(this.layout.exitStatus);
    return recorded === IDLE_EXIT_CODE || (recorded === null && processAlive(jail.keeperPid, jail.keeperStartTime) && !isZombieOrGone(jail.keeperPid));
  }

  /**
   * Runs a call to the supervisor once it is awake (at once, in this tick, when it surely is: a
   * caller may abort right after calling); an answer is proof of life from when the call began.
   */
  private answered<T>(call: () => Promise<T>): Promise<T> {
    const start = () => {
      const began = performance.now();
      return call().then(
        (result) => {
          this.lastContact = Math.max(this.lastContact, began);
          return result;
        },
        (error: unknown) => {
          if (error instanceof SupervisorTransportError) this.reportTransportFailure(error);
          throw error;
        },
      );
    };
    const waking = this.ensureAwake();
    return waking ? waking.then(start) : start();
  }

  /**
   * A lost supervisor connection is rare and says little by itself: the worker's log gets the jail's
   * state and the end of its log (bwrap's and the supervisor's own messages, never a command's
   * output), a few times per sandbox, so a failure seen once on a loaded machine can be explained.
   */
  private reportTransportFailure(error: Error): void {
    if (this.transportReports >= 3) return;
    this.transportReports += 1;
    let tail = "";
    try {
      const log = fs.readFileSync(this.layout.log, "utf8");
      tail = log.slice(-1_500);
    } catch {
      tail = "(no jail log)";
    }
    const jail = this.record.jail;
    const state = jail ? (jailAlive(jail) ? "alive" : "ended") : "none";
    // A loss while the sandbox is being ended is expected; one while it runs is what needs explaining.
    const ending = this.destroyed ? "being destroyed" : this.endingJail ? "its jail being ended" : this.released ? "released" : `sandbox ${this.record.state}`;
    process.stderr.write(`[sandbox-backend] sandbox ${this.id}: ${error.message} (jail ${state}, ${ending}); jail log tail:\n${tail}\n`);
    if (jail && state === "ended") this.reportJailExit(jail);
  }

  /** How the jail ended, once its keeper wrote it down (a signal says what killed it: 9 for SIGKILL, 31 for a seccomp kill). */
  private reportJailExit(jail: JailRecord): void {
    const started = performance.now();
    const check = () => {
      const status = recordedJailExit(this.layout.exitStatus);
      if (status === null && performance.now() - started < JAIL_EXIT_REPORT_WAIT_MS) return void setTimeout(check, 200).unref();
      const keeper = processAlive(jail.keeperPid, jail.keeperStartTime) ? "alive" : "gone";
      const said = status === null ? `not recorded within ${JAIL_EXIT_REPORT_WAIT_MS} ms (its keeper ${keeper})` : status > 128 ? `status ${status} (signal ${status - 128})` : `status ${status}`;
      process.stderr.write(`[sandbox-backend] sandbox ${this.id}: its jail's exit: ${said}\n`);
    };
    check();
  }

  /**
   * Makes sure the next connection reaches a supervisor that is not about to exit: at once when the
   * last proof of life is recent; else a ping, and a fresh jail when the old one went dormant.
   */
  private ensureAwake(): Promise<void> | void {
    if (this.context.idleStopMs <= 0 || this.record.state !== "running") return;
    if (performance.now() - this.lastContact < this.context.idleStopMs - IDLE_MARGIN_MS) return;
    return (this.waking ??= this.wake().finally(() => (this.waking = null)));
  }

  private async wake(): Promise<void> {
    const jail = this.record.jail;
    if (!jail) return;
    if (jailAlive(jail)) {
      const began = performance.now();
      try {
        await request(this.channel, { op: "ping" }, ["pong"], 5_000);
        this.lastContact = Math.max(this.lastContact, began);
        return;
      } catch {
        // It may have gone idle just now: its jail ends within moments.
      }
    }
    const keeperGone = () => !processAlive(jail.keeperPid, jail.keeperStartTime) || isZombieOrGone(jail.keeperPid);
    const waitFor = async (done: () => boolean, ms: number) => {
      for (const until = Date.now() + ms; !done() && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    await waitFor(() => !jailAlive(jail), 3_000);
    // The keeper records how the jail ended right after it ends, then exits. On a busy machine that
    // can take seconds: deciding before the record is there took a dormant sandbox for a stopped one.
    if (!jailAlive(jail)) await waitFor(() => keeperGone() || recordedJailExit(this.layout.exitStatus) !== null, 30_000);
    await this.serialized(async () => {
      if (!this.dormant() || recordedJailExit(this.layout.exitStatus) !== IDLE_EXIT_CODE || this.destroyed || this.released) return;
      await this.endJail();
      await this.launch();
    });
  }

  get createdAt(): number {
    return Date.parse(this.record.createdAt);
  }

  get expiresAt(): number {
    return Date.parse(this.record.expiresAt);
  }

  get expired(): boolean {
    return this.expiresAt <= Date.now();
  }

  get labels(): Readonly<Record<string, string>> {
    return this.record.labels;
  }

  get metadata(): Readonly<Record<string, unknown>> {
    return this.record.metadata;
  }

  get egress(): Readonly<EgressSpec> {
    return this.record.spec.egress;
  }

  get limits(): Readonly<SandboxLimits> {
    return this.record.spec.limits;
  }

  get denials(): readonly EgressDenial[] {
    return this.denialLog;
  }

  /** Its jail is alive (running or frozen) and its expiry not reached. */
  jailRunning(): boolean {
    return this.record.jail !== null && !this.expired && jailAlive(this.record.jail);
  }

  async setLabels(labels: Record<string, string>): Promise<void> {
    const checked = checkLabels(labels);
    return this.serialized(async () => {
      this.requireUsable();
      this.record.labels = checked;
      await this.persist();
    });
  }

  async setMetadata(metadata: Record<string, unknown>): Promise<void> {
    const checked = checkMetadata(metadata);
    return this.serialized(async () => {
      this.requireUsable();
      this.record.metadata = checked;
      await this.persist();
    });
  }

  async readStoredFile(jailPath: string, options: { maxBytes?: number } = {}): Promise<Buffer | null> {
    if (this.destroyed) throw new SandboxGoneError(`sandbox ${this.id} has been destroyed`);
    const home = this.record.spec.user?.home ?? SANDBOX_PATHS.home;
    const binds: Array<[string, string]> = [
      [`${home}/.cache/`, this.layout.cache],
      [`${home}/`, this.layout.home],
      [`${SANDBOX_PATHS.workspace}/`, this.layout.workspace],
      [`${SANDBOX_PATHS.tmp}/`, this.layout.tmp],
    ];
    const bind = typeof jailPath === "string" ? binds.find(([prefix]) => jailPath.startsWith(prefix)) : undefined;
    if (!bind) throw new SandboxInputError(`readStoredFile needs a path under /workspace, ${home} or /tmp (got ${String(jailPath).slice(0, 200)})`);
    // A stopped sandbox's own disk after a host restart: mounted again to be read.
    if (this.record.spec.limits.diskMb !== undefined && fs.existsSync(this.layout.diskImage) && !isMountPoint(this.layout.disk)) {
      await mountDisk({ disk: this.layout.disk, image: this.layout.diskImage });
    }
    return readFileNoFollow(bind[1], jailPath.slice(bind[0].length), options.maxBytes ?? 64 * 1024);
  }

  async exec(options: ExecOptions): Promise<ExecHandle> {
    checkExecOptions(options);
    await this.ensureAwake();
    this.requireRunning();
    return this.track(await this.answered(() => startExec(this.channel, options)));
  }

  async attach(pid: number): Promise<ExecHandle | null> {
    if (!Number.isInteger(pid) || pid <= 0) throw new SandboxStateError(`pid must be a positive integer`);
    await this.ensureAwake();
    this.requireRunning();
    const handle = await this.answered(() => attachExec(this.channel, pid));
    return handle ? this.track(handle) : null;
  }

  async processes(): Promise<ProcessInfo[]> {
    await this.ensureAwake();
    this.requireRunning();
    return this.answered(() => listProcesses(this.channel));
  }

  async reap(pid: number): Promise<void> {
    await this.ensureAwake();
    this.requireRunning();
    return this.answered(() => reapProcess(this.channel, pid));
  }

  stop(): Promise<void> {
    return this.serialized(async () => {
      this.requireUsable();
      const hadJail = this.record.jail !== null || this.record.cgroups.length > 0;
      if (hadJail) await this.endJail();
      if (hadJail || this.record.state !== "stopped") {
        this.record.state = "stopped";
        await this.persist();
      }
    });
  }

  start(): Promise<void> {
    return this.serialized(async () => {
      this.requireUsable();
      if (this.expired) throw new SandboxGoneError(`sandbox ${this.id} has expired`);
      if (this.jailRunning()) {
        if (this.record.state === "frozen") throw new SandboxStateError(`sandbox ${this.id} is frozen: thaw it instead`);
        return;
      }
      // A jail that ended on its own (crash, killed) may have left cgroups behind.
      if (this.record.jail || this.record.cgroups.length > 0) await this.endJail();
      await this.launch();
      this.violation = null;
    });
  }

  async freeze(): Promise<void> {
    // A dormant sandbox is still running: it gets its jail back first, so freezing it pauses that jail.
    await this.ensureAwake();
    return this.serialized(async () => {
      const jail = this.requireAliveJail();
      if (this.record.state === "frozen") return;
      const freezer = this.context.freezer === "auto" ? this.record.freezer : null;
      if (freezer) {
        await freezeCgroup(freezer);
        this.record.frozen = { method: "cgroup", preStopped: [], at: new Date().toISOString() };
      } else {
        const preStopped = await freezeBySignals(jail);
        this.record.frozen = { method: "signal", preStopped, at: new Date().toISOString() };
      }
      this.record.state = "frozen";
      await this.persist();
    });
  }

  thaw(): Promise<void> {
    return this.serialized(async () => {
      const jail = this.requireAliveJail();
      if (this.record.state !== "frozen") return;
      const frozen = this.record.frozen;
      if (frozen?.method === "cgroup" && this.record.freezer) await thawCgroup(this.record.freezer);
      else await thawBySignals(jail, frozen?.preStopped ?? []);
      this.record.state = "running";
      this.record.frozen = null;
      await this.persist();
    });
  }

  async extendTtl(untilMs: number): Promise<void> {
    const until = checkExpiry(untilMs, "extendTtl untilMs");
    return this.serialized(async () => {
      this.requireUsable();
      if (this.expired) throw new SandboxGoneError(`sandbox ${this.id} has expired`);
      const jail = this.record.jail;
      await writeDeadline(this.layout.deadline, until);
      if (jail && jailAlive(jail)) {
        wakeKeeper(jail.keeperPid, jail.keeperStartTime);
        // The keeper may have reached the old deadline just before it learned the new one.
        if (!jailAlive(jail)) throw new SandboxGoneError(`sandbox ${this.id} expired before its new deadline took effect`);
      }
      this.record.expiresAt = new Date(until).toISOString();
      await this.persist();
    });
  }

  /**
   * Whatever the jail sends is untrusted: a reply that breaks the protocol means its supervisor can
   * no longer be relied on, so the jail is ended (cold: processes gone, disk kept). The call that got
   * the reply has already failed with the error; later calls say why the sandbox is stopped.
   */
  private endForViolation(error: Error): void {
    if (this.violation || this.destroyed || this.released) return;
    this.violation = error;
    try {
      fs.appendFileSync(this.layout.log, `[backend ${new Date().toISOString()}] ending the jail: ${error.message}\n`);
    } catch {
      // The log is a diagnostic only.
    }
    void this.serialized(async () => {
      if (this.destroyed || (!this.record.jail && this.record.cgroups.length === 0)) return;
      await this.endJail();
      this.record.state = "stopped";
      await this.persist();
    }).catch(() => undefined);
  }

  /** Starts the jail of a sandbox whose directories and record exist (create, start). */
  launch(): Promise<void> {
    return this.launchJail();
  }

  /** Re-serves what the previous worker's handles served (the egress proxy) for a live jail it adopts. */
  async adopt(): Promise<void> {
    await this.serialized(async () => {
      if (!this.jailRunning()) return;
      if (!grantIsEmpty(this.record.spec.egress)) this.proxy = await this.startProxy();
      this.record.owner = this.context.owner;
      await this.persist();
    });
  }

  /** Ends everything of the sandbox for good (confirmed), then removes its cgroups and directories. */
  destroy(): Promise<void> {
    return this.serialized(async () => {
      if (this.destroyed) return;
      this.closeHandles();
      await this.endJail();
      const left = await removeCgroups(cgroupDirsNamed(this.layout.cgroupName));
      if (left.length > 0) throw new SandboxError("EBUSY", `cgroups of sandbox ${this.id} could not be removed: ${left.join(", ")}`);
      await removeSandboxTree(this.layout);
      this.destroyed = true;
    });
  }

  /**
   * Lets go of the sandbox in this worker (proxy, open exec handles); the jail keeps running. A
   * lifecycle change already under way (a stop, freeze or destroy made through this handle) ends
   * first: whoever removes the state directory after a close must never race a jail still changing.
   */
  async release(): Promise<void> {
    this.released = true;
    this.closeHandles();
    await this.queue;
    const proxy = this.proxy;
    this.proxy = null;
    await proxy?.close();
  }

  private closeHandles(): void {
    for (const handle of this.openHandles) handle.close();
    this.openHandles.clear();
  }

  private track(handle: ExecHandle): ExecHandle {
    this.openHandles.add(handle);
    handle.exited.then(
      () => this.openHandles.delete(handle),
      () => this.openHandles.delete(handle),
    );
    return handle;
  }

  private requireUsable(): void {
    if (this.destroyed) throw new SandboxGoneError(`sandbox ${this.id} has been destroyed`);
    if (this.released) throw new SandboxStateError(`sandbox ${this.id} was let go by this worker (backend closed): get it again`);
  }

  private requireAliveJail(): NonNullable<SandboxRecord["jail"]> {
    this.requireUsable();
    if (this.expired) throw new SandboxGoneError(`sandbox ${this.id} has expired`);
    if (!this.jailRunning()) throw new SandboxStateError(`sandbox ${this.id} is stopped`);
    return this.record.jail!;
  }

  private requireRunning(): void {
    if (this.violation) throw new SandboxGoneError(`sandbox ${this.id} was ended because its supervisor broke the protocol: ${this.violation.message}`);
    this.requireAliveJail();
    if (this.record.state === "frozen") throw new SandboxStateError(`sandbox ${this.id} is frozen: thaw it first`);
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private persist(): Promise<void> {
    return writeRecord(this.layout, this.record);
  }

  private async startProxy(): Promise<EgressProxy> {
    const proxy = await startEgressProxy({
      socketPath: this.layout.egressSocket,
      grant: this.record.spec.egress,
      resolver: this.context.resolver,
      onDenied: (denial) => {
        this.denialLog.push(denial);
        if (this.denialLog.length > MAX_DENIALS) this.denialLog.shift();
      },
    });
    // The supervisor connects to it as the jail's host user (a root worker's jails run as another uid).
    const owner = this.context.runtime.hostUser;
    if (owner)
      await fsp.chown(this.layout.egressSocket, owner.uid, owner.gid).catch(async (error: unknown) => {
        await proxy.close();
        throw error;
      });
    return proxy;
  }

  private async launchJail(): Promise<void> {
    const record = this.record;
    const spec = record.spec;
    const cgroups = await createSandboxCgroups(this.layout.cgroupName, spec.limits, { freezer: this.context.freezer === "auto" });
    record.cgroups = cgroups.dirs;
    record.freezer = cgroups.freezer;
    this.unenforcedLimits = [...cgroups.unenforced, ...(await this.ensureDisk())];
    // Everything started from here on (proxy, jail) is ended again if the start fails at any step.
    try {
      if (!grantIsEmpty(spec.egress)) this.proxy = await this.startProxy();
      const runtime = this.context.runtime;
      const node = supervisorNode(spec.rootfs ?? undefined, await runtime.nodeBinaryFor(this.context.nodeBinary));
      const loader = runtime.loaderFor(node.hostNodeBinary, spec.rootfs ?? "/");
      this.unenforcedProtections = [
        ...runtime.unenforced,
        ...(loader ? [] : [{ protection: "supervisor-not-dumpable" as const, reason: `no ELF loader found for ${node.hostNodeBinary} (a static node binary?): the supervisor stays dumpable` }]),
      ];
      const jail = buildJailArgv(
        {
          workspaceDir: this.layout.workspace,
          homeDir: this.layout.home,
          cacheDir: this.layout.cache,
          tmpDir: this.layout.tmp,
          etcDir: await runtime.etcDir(generatedEtcFiles(spec.user ?? undefined)),
          egressDir: this.proxy ? this.layout.egress : undefined,
          supervisorScript: await runtime.supervisorScript(),
          nodeBinary: node.hostNodeBinary,
          rootfs: spec.rootfs ?? undefined,
          loaderFd: loader ? JAIL_FDS.loaderFd : undefined,
          seccompFd: runtime.seccomp ? JAIL_FDS.seccompFd : undefined,
          reaperFd: runtime.reaper ? JAIL_FDS.reaperFd : undefined,
          shmBytes: shmBytesFor(spec.limits),
          ...(spec.user ? { user: spec.user } : {}),
          mounts: (spec.mounts ?? []).map((mount, index) => ({ hostDir: mountDirOf(this.layout, mount, index), path: mount.path, readOnly: mount.readOnly })),
        },
        JAIL_FDS,
      );
      const supervisorConfig = {
        baseEnv: { ...sandboxBaseEnv(spec.egress, jail.path, spec.user), ...spec.env },
        defaultCwd: SANDBOX_PATHS.workspace,
        egress: this.proxy ? { port: EGRESS_PROXY_PORT, socketPath: `${SANDBOX_PATHS.egressDir}/proxy.sock` } : undefined,
        guardedPidMax: runtime.seccomp ? GUARDED_PID_MAX : 0,
        reaper: runtime.reaper ? SANDBOX_PATHS.reaper : null,
        idleExitMs: this.context.idleStopMs,
      };
      const launched = await launchJail({
        bwrapPath: this.context.bwrapPath,
        bwrapOptions: jail.options,
        bwrapCommand: jail.command,
        startPrefix: await runtime.startPrefix(),
        seccompProgram: runtime.seccomp,
        loaderFile: loader,
        reaperProgram: runtime.reaper,
        socketPath: this.layout.socket,
        logPath: this.layout.log,
        cgroupProcs: cgroups.procsFiles,
        deadlineFile: this.layout.deadline,
        expiresAt: this.expiresAt,
        thaw: cgroups.freezer ? thawWrite(cgroups.freezer) : undefined,
        exitFile: this.layout.exitStatus,
        supervisorConfig: JSON.stringify(supervisorConfig),
      });
      this.launched = launched;
      // Its supervisor starts its idle clock no earlier than this.
      this.lastContact = performance.now();
      void launched.exited.then(() => {
        if (this.launched !== launched) return;
        const error = new SandboxGoneError(`the jail of sandbox ${this.id} has ended (see jail.log in its directory)`);
        for (const listener of [...this.goneListeners]) listener(error);
      });
      record.jail = launched.record;
      record.state = "running";
      record.frozen = null;
      record.owner = this.context.owner;
      await this.persist();
    } catch (error) {
      const launched = this.launched;
      this.launched = null;
      if (launched) await stopJail(launched.record, cgroups.dirs, { exited: launched.exited }).catch(() => undefined);
      const proxy = this.proxy;
      this.proxy = null;
      await proxy?.close();
      record.cgroups = await removeCgroups(cgroups.dirs);
      record.freezer = null;
      record.jail = null;
      record.state = "stopped";
      throw error;
    }
  }

  /**
   * Mounts the sandbox's own disk when it has one (after a host restart the mount is gone); says so
   * when its disk limit is not enforced.
   */
  private async ensureDisk(): Promise<Array<{ limit: LimitName; reason: string }>> {
    const diskMb = this.record.spec.limits.diskMb;
    if (diskMb === undefined) return [];
    const paths = { disk: this.layout.disk, image: this.layout.diskImage };
    if (fs.existsSync(paths.image)) {
      if (!isMountPoint(paths.disk)) await mountDisk(paths);
      return [];
    }
    return [{ limit: "diskMb", reason: this.context.diskProblem ?? "this sandbox was created without a disk of its own" }];
  }

  /** Ends the jail (confirmed), the proxy and the cgroups; the caller sets the state and persists. */
  private async endJail(): Promise<void> {
    const record = this.record;
    const freezer = record.freezer;
    if (record.jail) {
      this.endingJail = true;
      try {
        await stopJail(record.jail, record.cgroups, {
          exited: this.launched?.exited,
          thaw: freezer ? () => thawCgroup(freezer, 1_000) : undefined,
        });
      } finally {
        this.endingJail = false;
      }
    }
    this.launched = null;
    const proxy = this.proxy;
    this.proxy = null;
    await proxy?.close();
    const left = await removeCgroups(record.cgroups);
    record.cgroups = left;
    record.jail = null;
    record.frozen = null;
    if (left.length === 0) record.freezer = null;
    await fsp.rm(this.layout.socket, { force: true });
    if (left.length > 0) throw new SandboxError("EBUSY", `cgroups of sandbox ${this.id} could not be removed: ${left.join(", ")}`);
  }
}
