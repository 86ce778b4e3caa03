import { checkTimeScale, type VendorClock } from "@paperclip-sandbox/emulator-kit";

/** What a test (or the CLI) can tune about the emulated control plane. */
export interface EnvdEmulatorOptions {
  /**
   * Vendor milliseconds per real millisecond, the kit's one meaning (default 1). With 100, a sandbox
   * created with `timeout: 300` (seconds) ends after 3 real seconds; `endAt` reports that real
   * instant, so SDK callers and the emulator agree on it.
   */
  timeScale?: number;
  /** The vendor clock itself (a test's `createManualClock()`); `timeScale` is then the clock's. */
  clock?: VendorClock;
  /** How long a paused sandbox is kept before it is deleted (vendor ms; default 1 hour). */
  pausedRetentionMs?: number;
  /** Live (running or paused) sandboxes at once; a create past it is the vendor's 429 quota error (default 20). */
  maxSandboxes?: number;
  /** Templates that exist (default `["base"]`); a create naming another gets 404. */
  templates?: string[];
  /** `envdVersion` reported to SDKs (default `0.6.4`: every feature the two SDKs gate on). */
  envdVersion?: string;
  /** API key the control plane accepts (default a fresh random one, in `credentials.apiKey`). */
  apiKey?: string;
  /** Loopback port (default 0: any free one). */
  port?: number;
}

export interface ResolvedEnvdOptions {
  timeScale: number;
  clock: VendorClock | undefined;
  pausedRetentionMs: number;
  maxSandboxes: number;
  templates: ReadonlySet<string>;
  envdVersion: string;
  apiKey: string | undefined;
  port: number;
}

export function resolveEnvdOptions(options: EnvdEmulatorOptions): ResolvedEnvdOptions {
  const timeScale = options.clock?.timeScale ?? checkTimeScale(options.timeScale);
  const pausedRetentionMs = options.pausedRetentionMs ?? 60 * 60_000;
  if (!(Number.isInteger(pausedRetentionMs) && pausedRetentionMs >= 1_000)) throw new TypeError(`pausedRetentionMs: must be an integer of at least 1000 (got ${String(options.pausedRetentionMs)})`);
  const maxSandboxes = options.maxSandboxes ?? 20;
  if (!(Number.isInteger(maxSandboxes) && maxSandboxes >= 1)) throw new TypeError(`maxSandboxes: must be a positive integer (got ${String(options.maxSandboxes)})`);
  const templates = options.templates ?? ["base"];
  if (!Array.isArray(templates) || templates.some((t) => typeof t !== "string" || t === "")) throw new TypeError("templates: must be a list of non-empty strings");
  const envdVersion = options.envdVersion ?? "0.6.4";
  if (!/^\d+\.\d+\.\d+$/.test(envdVersion)) throw new TypeError(`envdVersion: must look like 1.2.3 (got ${JSON.stringify(envdVersion)})`);
  const port = options.port ?? 0;
  if (!(Number.isInteger(port) && port >= 0 && port <= 65_535)) throw new TypeError(`port: must be 0..65535 (got ${String(options.port)})`);
  return { timeScale, clock: options.clock, pausedRetentionMs, maxSandboxes, templates: new Set(templates), envdVersion, apiKey: options.apiKey, port };
}
