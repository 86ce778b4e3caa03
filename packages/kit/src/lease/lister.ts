/** One provider resource found at the vendor by label, whoever created it (lost-create clean-up, `leases gc`). */
export interface ListedResource {
  providerLeaseId: string;
  /** The resource's labels as the vendor reports them (decoded from its name for label-less vendors). */
  labels: Record<string, string>;
  createdAt?: string;
  /** When the vendor (or the lease) says it ends; past means expired. */
  expiresAt?: string | null;
  /** The vendor's state, for people (`started`, `stopped`, `expired`). */
  state?: string;
  /** For local providers: whether the worker that last held it is still running; undefined when it cannot tell. */
  ownerAlive?: boolean;
  /** Passed as `leaseMetadata` when `leases gc` destroys it through the plugin's hook. */
  metadata?: Record<string, unknown>;
}

export interface LeaseListerContext {
  /** The environment the plugin worker would see (the host's scrubbed one), for env fallbacks. */
  env: NodeJS.ProcessEnv;
  /** Labels the caller wants; a lister may filter at the vendor with them (the caller filters again). */
  matchLabels?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * What each provider package exports from its main module as `listLeases` (the kit derives it from
 * the definition's `list`: `defineSandboxProvider(...).listLeases`), for the CLI's `leases gc` to
 * find leaked resources at the vendor: `config` is the driver config the worker would get (secrets
 * included), still to be parsed.
 */
export type ProviderLeaseLister = (config: Record<string, unknown>, ctx: LeaseListerContext) => Promise<ListedResource[]>;

const CONTRACT = Symbol.for("paperclip-sandbox.lease-lister.v1");

/** Marks a lister as following this contract (`listLeases(config, ctx)`), so the CLI can tell it from older exports. */
export function defineLeaseLister(lister: ProviderLeaseLister): ProviderLeaseLister {
  if (typeof lister !== "function") throw new TypeError("defineLeaseLister: expected a function (config, ctx) => Promise<ListedResource[]>");
  Object.defineProperty(lister, CONTRACT, { value: 1 });
  return lister;
}

/** True for a lister made by `defineLeaseLister` (any copy of the kit). */
export function isProviderLeaseLister(value: unknown): value is ProviderLeaseLister {
  return typeof value === "function" && (value as unknown as Record<symbol, unknown>)[CONTRACT] === 1;
}
