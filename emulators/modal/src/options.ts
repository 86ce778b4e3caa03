import { checkTimeScale, type VendorClock } from "@paperclip-sandbox/emulator-kit";

export interface ModalEmulatorOptions {
  /** The account's token pair; random `ak-…` / `as-…` values by default. */
  tokenId?: string;
  tokenSecret?: string;
  /**
   * Speed of Modal's clocks (sandbox timeout, idle timeout, snapshot image TTL) in the kit's one
   * meaning: vendor ms per real ms. Default 1; 100 makes a 300 s sandbox timeout end after 3 s.
   */
  timeScale?: number;
  /** The vendor clock itself (a test's `createManualClock()`); `timeScale` is then the clock's. */
  clock?: VendorClock;
  /** Lifetime of the control plane's auth tokens (real seconds). Default 3600. */
  authTokenTtlSeconds?: number;
  /** Lifetime of task command router tokens (real seconds). Default 3600. */
  routerTokenTtlSeconds?: number;
  /** Running sandboxes the account may have at once; past it a create answers RESOURCE_EXHAUSTED. */
  maxSandboxes?: number;
  /** gRPC port (default: any free port). */
  port?: number;
  /** Parent directory of the emulator's scratch directory (default the OS temp dir; keep it short). */
  scratchParent?: string;
}

export interface ResolvedOptions {
  tokenId: string;
  tokenSecret: string;
  timeScale: number;
  clock: VendorClock | undefined;
  authTokenTtlSeconds: number;
  routerTokenTtlSeconds: number;
  maxSandboxes: number;
  port: number | undefined;
  scratchParent: string | undefined;
}

/** Refuses bad options naming the option and the rule. */
export function resolveOptions(options: ModalEmulatorOptions, mint: { tokenId(): string; tokenSecret(): string }): ResolvedOptions {
  const positive = (name: string, value: number | undefined, fallback: number): number => {
    if (value === undefined) return fallback;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new TypeError(`modal emulator option ${name}: must be a positive number`);
    return value;
  };
  const text = (name: string, value: string | undefined, fallback: () => string): string => {
    if (value === undefined) return fallback();
    if (typeof value !== "string" || value.length === 0) throw new TypeError(`modal emulator option ${name}: must be a non-empty string`);
    return value;
  };
  if (options.maxSandboxes !== undefined && (!Number.isInteger(options.maxSandboxes) || options.maxSandboxes < 1)) {
    throw new TypeError("modal emulator option maxSandboxes: must be a positive integer");
  }
  return {
    tokenId: text("tokenId", options.tokenId, mint.tokenId),
    tokenSecret: text("tokenSecret", options.tokenSecret, mint.tokenSecret),
    timeScale: options.clock?.timeScale ?? checkTimeScale(options.timeScale, "modal emulator option timeScale"),
    clock: options.clock,
    authTokenTtlSeconds: positive("authTokenTtlSeconds", options.authTokenTtlSeconds, 3600),
    routerTokenTtlSeconds: positive("routerTokenTtlSeconds", options.routerTokenTtlSeconds, 3600),
    maxSandboxes: options.maxSandboxes ?? Number.POSITIVE_INFINITY,
    port: options.port,
    scratchParent: options.scratchParent,
  };
}
