import { randomBytes } from "node:crypto";
import { createSerial, type VendorClock } from "@paperclip-sandbox/emulator-kit";
import { restoreDisk, type Sandbox as Jail, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import type { ResolvedEnvdOptions } from "./options.js";
import { ProcessTable } from "./process-table.js";

type EnvdSandboxState = "running" | "paused";

/** One emulated sandbox: control-plane facts plus the jail that runs it. */
export interface EnvdSandbox {
  readonly id: string;
  readonly templateId: string;
  readonly clientId: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly envVars: Readonly<Record<string, string>>;
  /** Set for a secure sandbox: envd calls must carry it as X-Access-Token. */
  readonly envdAccessToken: string | undefined;
  readonly autoPause: boolean;
  readonly allowInternetAccess: boolean;
  readonly startedAt: number;
  /** Real epoch ms at which the sandbox times out (running) or the last one it had (paused). */
  endAt: number;
  /** Paused only: when the pause snapshot is deleted. */
  pausedUntil: number | undefined;
  state: EnvdSandboxState;
  readonly jail: Jail;
  readonly processes: ProcessTable;
  /** Open envd streams; ended when the sandbox pauses or goes away (their connections would break). */
  readonly streams: Set<(why: string) => void>;
}

export interface CreateInput {
  templateId: string;
  timeoutSeconds: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  secure: boolean;
  autoPause: boolean;
  allowInternetAccess: boolean;
  /** A snapshot template's copy of a sandbox's writable trees, restored before anything runs. */
  disk?: string;
}

export type ConnectOutcome = { sandbox: EnvdSandbox; resumed: boolean };

/** The backend's own expiry trails the emulated one: it only matters if the emulator dies. */
const BACKSTOP_MS = 10_000;
/** E2B's sandbox user: commands start in its home, relative paths resolve there, files are its own. */
export const ENVD_USER = { name: "user", home: "/home/user" } as const;

/**
 * The emulated sandboxes and their lifecycle: create, timeout (kill, or pause with autoPause), pause
 * and resume as the jail's freeze and thaw (memory and processes kept), connect (extends a running
 * sandbox's timeout, never shortens it; resumes a paused one with a fresh timeout), kill. Transitions
 * of one sandbox run one at a time.
 */
export class SandboxRegistry {
  private readonly sandboxes = new Map<string, EnvdSandbox>();
  private readonly timers = new Map<string, () => void>();
  private readonly locked = createSerial();
  private closed = false;

  constructor(
    private readonly backend: SandboxBackend,
    private readonly options: ResolvedEnvdOptions,
    private readonly clock: VendorClock,
  ) {}

  private now(): number {
    return this.clock.now();
  }

  /** How long (on the clock's time line) an emulated timeout of `seconds` lasts. */
  scaled(seconds: number): number {
    return Math.max(1, this.clock.duration(seconds * 1000));
  }

  get(id: string): EnvdSandbox | undefined {
    return this.sandboxes.get(id);
  }

  list(): EnvdSandbox[] {
    return [...this.sandboxes.values()];
  }

  get size(): number {
    return this.sandboxes.size;
  }

  async create(input: CreateInput): Promise<EnvdSandbox> {
    if (this.closed) throw new Error("the emulator is closing");
    const id = `i${randomBytes(12).toString("hex").slice(0, 19)}`;
    const startedAt = this.now();
    const endAt = startedAt + this.scaled(input.timeoutSeconds);
    const jail = await this.backend.create({
      id,
      env: input.envVars,
      user: ENVD_USER,
      expiresAt: this.clock.realDeadline(endAt) + BACKSTOP_MS,
      // envd's sandboxes reach the internet unless told otherwise; the emulator's never do (no egress grant).
      egress: { allowFqdns: [], allowCidrs: [] },
      labels: {},
      metadata: { templateId: input.templateId },
    });
    if (input.disk !== undefined) {
      try {
        await restoreDisk(input.disk, jail);
      } catch (error) {
        await this.backend.destroy(id).catch(() => undefined);
        throw error;
      }
    }
    const sandbox: EnvdSandbox = {
      id,
      templateId: input.templateId,
      clientId: "emulator",
      metadata: { ...input.metadata },
      envVars: { ...input.envVars },
      envdAccessToken: input.secure ? randomBytes(24).toString("base64url") : undefined,
      autoPause: input.autoPause,
      allowInternetAccess: input.allowInternetAccess,
      startedAt,
      endAt,
      pausedUntil: undefined,
      state: "running",
      jail,
      processes: new ProcessTable(jail),
      streams: new Set(),
    };
    this.sandboxes.set(id, sandbox);
    this.arm(sandbox);
    return sandbox;
  }

  /** Runs `work` on a sandbox with its transitions held off (a snapshot's copy); undefined when there is none. */
  withSandbox<T>(id: string, work: (sandbox: EnvdSandbox) => Promise<T>): Promise<T | undefined> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      return sandbox ? work(sandbox) : undefined;
    });
  }

  /** `POST /sandboxes/{id}/timeout`: the timeout from now, shorter or longer. */
  setTimeout(id: string, seconds: number): Promise<EnvdSandbox | undefined> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox || sandbox.state !== "running") return undefined;
      await this.moveEnd(sandbox, this.now() + this.scaled(seconds));
      return sandbox;
    });
  }

  /** `connect`: a running sandbox's timeout only grows; a paused one is resumed with `seconds` from now. */
  connect(id: string, seconds: number, options: { memory?: boolean } = {}): Promise<ConnectOutcome | undefined> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox) return undefined;
      const wanted = this.now() + this.scaled(seconds);
      if (sandbox.state === "running") {
        if (wanted > sandbox.endAt) await this.moveEnd(sandbox, wanted);
        return { sandbox, resumed: false };
      }
      if (options.memory === false) {
        // A filesystem-only resume: a cold boot from disk, every process gone.
        await sandbox.jail.thaw();
        await sandbox.jail.stop();
        sandbox.processes.closeAll();
        await sandbox.jail.start();
      } else {
        await sandbox.jail.thaw();
      }
      sandbox.state = "running";
      sandbox.pausedUntil = undefined;
      await this.moveEnd(sandbox, wanted);
      return { sandbox, resumed: true };
    });
  }

  /** `refreshes`: a running sandbox lives at least `seconds` more from now (never shortened). */
  refresh(id: string, seconds: number): Promise<EnvdSandbox | undefined> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox || sandbox.state !== "running") return undefined;
      const wanted = this.now() + this.scaled(seconds);
      if (wanted > sandbox.endAt) await this.moveEnd(sandbox, wanted);
      return sandbox;
    });
  }

  /** `pause`: "paused", "already" (409), or undefined when there is no such sandbox. */
  pause(id: string): Promise<"paused" | "already" | undefined> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox) return undefined;
      if (sandbox.state === "paused") return "already";
      await this.pauseNow(sandbox);
      return "paused";
    });
  }

  /** `kill`: true when it existed; resolves once the jail is gone. */
  kill(id: string): Promise<boolean> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox) return false;
      await this.killNow(sandbox, "sandbox was killed");
      return true;
    });
  }

  async closeAll(): Promise<void> {
    this.closed = true;
    const all = [...this.sandboxes.keys()];
    await Promise.allSettled(all.map((id) => this.kill(id)));
  }

  private async pauseNow(sandbox: EnvdSandbox): Promise<void> {
    endStreams(sandbox, "sandbox was paused");
    await sandbox.jail.freeze();
    sandbox.state = "paused";
    // E2B keeps a paused sandbox's snapshot; its timeout does not run while paused.
    sandbox.pausedUntil = this.now() + this.clock.duration(this.options.pausedRetentionMs);
    await sandbox.jail.extendTtl(this.clock.realDeadline(sandbox.pausedUntil) + BACKSTOP_MS);
    this.arm(sandbox);
  }

  private async killNow(sandbox: EnvdSandbox, why: string): Promise<void> {
    this.sandboxes.delete(sandbox.id);
    this.disarm(sandbox.id);
    endStreams(sandbox, why);
    sandbox.processes.closeAll();
    await this.backend.destroy(sandbox.id);
  }

  private async moveEnd(sandbox: EnvdSandbox, endAt: number): Promise<void> {
    sandbox.endAt = endAt;
    await sandbox.jail.extendTtl(this.clock.realDeadline(endAt) + BACKSTOP_MS);
    this.arm(sandbox);
  }

  private arm(sandbox: EnvdSandbox): void {
    this.disarm(sandbox.id);
    const at = sandbox.state === "running" ? sandbox.endAt : (sandbox.pausedUntil ?? sandbox.endAt);
    this.timers.set(
      sandbox.id,
      this.clock.at(at, () => void this.onDeadline(sandbox.id)),
    );
  }

  private disarm(id: string): void {
    this.timers.get(id)?.();
    this.timers.delete(id);
  }

  private onDeadline(id: string): Promise<void> {
    return this.locked(id, async () => {
      const sandbox = this.sandboxes.get(id);
      if (!sandbox) return;
      const now = this.now();
      if (sandbox.state === "running") {
        if (now < sandbox.endAt) return this.arm(sandbox);
        if (sandbox.autoPause) await this.pauseNow(sandbox);
        else await this.killNow(sandbox, "sandbox timed out");
        return;
      }
      if (sandbox.pausedUntil !== undefined && now < sandbox.pausedUntil) return this.arm(sandbox);
      await this.killNow(sandbox, "paused sandbox expired");
    }).catch((error: unknown) => {
      process.stderr.write(`[emulator envd] timeout of sandbox ${id} failed: ${(error as Error).message}\n`);
    });
  }
}

function endStreams(sandbox: EnvdSandbox, why: string): void {
  for (const end of [...sandbox.streams]) end(why);
  sandbox.streams.clear();
}
