import { checkTimeScale, type VendorClock } from "@paperclip-sandbox/emulator-kit";

/** What an emulator run can be told; every field has a default fit for tests. */
export interface DaytonaEmulatorOptions {
  /** Loopback port (default 0: any free port). */
  port?: number;
  /** The API key the emulator accepts (default a fresh random `dtn_` key). */
  apiKey?: string;
  /** Vendor ms per real ms (the kit's one meaning; default 1): 600 makes a Daytona minute last 100 real ms. */
  timeScale?: number;
  /** The vendor clock itself (a test's `createManualClock()`); `timeScale` is then the clock's. */
  clock?: VendorClock;
  /** Real milliseconds per Daytona minute: the older spelling of `timeScale` (= 60000 / minuteMs). */
  minuteMs?: number;
  /** How often (real ms) due intervals are applied (default a tenth of a Daytona minute, 10-1000 ms). */
  sweepMs?: number;
  /** How long the transitional states (creating, starting, stopping, archiving, restoring, destroying) last (default 0: the call answers in the final state). */
  transitionMs?: number;
  /** The organization's totals: cores and GiB of memory of running sandboxes, GiB of disk of every sandbox not archived. */
  quota?: Partial<DaytonaQuota>;
  /** Snapshot names that exist (default: any name is accepted). */
  snapshots?: readonly string[];
  /** A jail never outlives this, whatever its intervals say, so a crashed emulator leaks nothing for long (default 6 h). */
  maxLifetimeMs?: number;
  /** Parent directory of the sandboxes' state directory (default the OS temp dir; keep it short: socket paths). */
  stateParentDir?: string;
  organizationId?: string;
}

export interface DaytonaQuota {
  cpu: number;
  memory: number;
  disk: number;
}

export interface ResolvedOptions {
  port: number;
  timeScale: number;
  sweepMs: number;
  transitionMs: number;
  quota: DaytonaQuota;
  snapshots: ReadonlySet<string> | undefined;
  maxLifetimeMs: number;
  organizationId: string;
}

const DEFAULT_QUOTA: DaytonaQuota = { cpu: 64, memory: 128, disk: 640 };

export function resolveOptions(options: DaytonaEmulatorOptions): ResolvedOptions {
  const positive = (name: string, value: number | undefined, fallback: number, min = 1): number => {
    const chosen = value ?? fallback;
    if (!Number.isFinite(chosen) || chosen < min) throw new TypeError(`daytona emulator ${name}: must be a number >= ${min} (got ${String(value)})`);
    return chosen;
  };
  if (options.minuteMs !== undefined && options.timeScale !== undefined) throw new TypeError("daytona emulator: give timeScale or minuteMs, not both");
  const timeScale =
    options.clock?.timeScale ?? (options.minuteMs !== undefined ? 60_000 / positive("minuteMs", options.minuteMs, 60_000) : checkTimeScale(options.timeScale, "daytona emulator timeScale"));
  const minuteRealMs = 60_000 / timeScale;
  return {
    port: positive("port", options.port, 0, 0),
    timeScale,
    sweepMs: positive("sweepMs", options.sweepMs, Math.min(1_000, Math.max(10, Math.floor(minuteRealMs / 10))), 1),
    transitionMs: positive("transitionMs", options.transitionMs, 0, 0),
    quota: {
      cpu: positive("quota.cpu", options.quota?.cpu, DEFAULT_QUOTA.cpu, 0),
      memory: positive("quota.memory", options.quota?.memory, DEFAULT_QUOTA.memory, 0),
      disk: positive("quota.disk", options.quota?.disk, DEFAULT_QUOTA.disk, 0),
    },
    snapshots: options.snapshots ? new Set(options.snapshots) : undefined,
    maxLifetimeMs: positive("maxLifetimeMs", options.maxLifetimeMs, 6 * 60 * 60 * 1000, 1_000),
    organizationId: options.organizationId ?? "org-emulator",
  };
}
