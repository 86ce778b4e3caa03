export interface ModalEmulatorOptions {
  /** The account's token pair; random `ak-…` / `as-…` values by default. */
  tokenId?: string;
  tokenSecret?: string;
  /**
   * Speed of Modal's clocks (sandbox timeout, idle timeout, snapshot image TTL): real ms per Modal
   * ms. Default 1; 0.01 makes a 300 s sandbox timeout end the sandbox after 3 s.
   */
  timeScale?: number;
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
    timeScale: positive("timeScale", options.timeScale, 1),
    authTokenTtlSeconds: positive("authTokenTtlSeconds", options.authTokenTtlSeconds, 3600),
    routerTokenTtlSeconds: positive("routerTokenTtlSeconds", options.routerTokenTtlSeconds, 3600),
    maxSandboxes: options.maxSandboxes ?? Number.POSITIVE_INFINITY,
    port: options.port,
    scratchParent: options.scratchParent,
  };
}
