import type {
  PluginContext,
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentProbeParams,
  PluginEnvironmentProbeResult,
} from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import type { ProviderConfig } from "../config/define.js";
import type { EgressGrant } from "../egress/grant.js";
import type { LeaseLabels } from "../lease/labels.js";
import type { FileTransport, ScriptRunner, TransportCapabilities } from "../transport.js";

/** What a provider knows about one of its sandboxes; the kit keeps it per lease in the worker. */
export interface SandboxHandle {
  /** The host's `providerLeaseId` for this sandbox (usually the vendor id, validated by the provider). */
  providerLeaseId: string;
  /** When the vendor (or the local engine) ends the sandbox, if it bounds it. */
  expiresAt?: Date | null;
  /** "running" unless the provider knows better; a stopped/frozen sandbox is started before use. */
  state?: "running" | "stopped" | "frozen";
  /** The resource's labels at the vendor, when it has them (ownership is checked against them). */
  labels?: Readonly<Record<string, string>>;
}

/** A lease the host names: its id, the config, and the metadata the kit returned at acquire. */
export interface LeaseRef<C> {
  providerLeaseId: string;
  config: C;
  metadata: Record<string, unknown>;
  companyId: string;
  environmentId: string;
}

export interface CreateInput<C> {
  config: C;
  params: PluginEnvironmentAcquireLeaseParams;
  /** provider, company, environment and run labels (values already fit label rules). */
  labels: LeaseLabels;
  /** The provider must end the sandbox at or before this (its TTL and the host's requested deadline), or say it cannot. */
  expiresAt: Date | null;
  /** Identity of the acquire and the sandbox's shape (also written to the reuse sentinel). */
  fingerprint: string;
  reusable: boolean;
  /** The lease's egress grant (config lists merged with the task's), for providers that declare `egress`. */
  grant: EgressGrant | undefined;
  /** Fires when the acquire budget runs out: stop waiting and let the kit clean up. */
  signal: AbortSignal;
  /**
   * Call as soon as the vendor has assigned the sandbox its id, before any further setup: should the
   * acquire fail later, or its answer arrive after the budget, the kit destroys that sandbox.
   */
  created(providerLeaseId: string): void;
}

export interface HookContext {
  /** The host's plugin context (logger, execution log, notifications); set after `setup`. */
  ctx: PluginContext | undefined;
  signal?: AbortSignal;
}

/** One provider resource found at the vendor by label (for `leases gc` and lost-create clean-up). */
export interface ListedResource {
  providerLeaseId: string;
  labels: Record<string, string>;
  createdAt?: string;
  expiresAt?: string | null;
  state?: string;
  /** For local providers: whether the worker that last held it is still running. */
  ownerAlive?: boolean;
}

/**
 * A sandbox provider, declared: the kit writes every Paperclip hook from this (see
 * `defineSandboxProvider`). Everything a vendor call can confirm must be confirmed before the
 * function resolves: `destroy` resolves only once the sandbox is gone, `stop` once it is stopped.
 */
export interface SandboxProviderDefinition<S extends z.ZodObject, H extends SandboxHandle> {
  driverKey: string;
  config: ProviderConfig<S>;
  /** What `runner(handle)` can do; declared statically because the manifest is. */
  transport: TransportCapabilities;
  /** The sandbox's working directory (the lease's `metadata.remoteCwd`; the host empties /tmp without it). */
  workspaceDir(handle: H, config: z.output<S>): string;
  /** Directories sync may touch; default just the workspace. */
  syncRoots?(handle: H, config: z.output<S>): string[];
  /** Config fields that shape the sandbox (image, size, ...): a change means another sandbox. */
  shape(config: z.output<S>): Record<string, unknown>;
  /** The provider's own lifetime for a lease (ms), bounded further by the host's requested deadline. */
  defaultTtlMs?(config: z.output<S>): number | null | undefined;
  /** Whether leases of this config are kept at release (default `config.reuseLease === true`). */
  reusable?(config: z.output<S>): boolean;
  /** The provider enforces egress grants; the kit merges the config's lists with the task's. */
  egress?: { fromConfig(config: z.output<S>): EgressGrant };
  /** How long acquire may take before the kit gives up and cleans up (default from `config.timeoutMs`). */
  acquireBudgetMs?(config: z.output<S>): number;

  create(input: CreateInput<z.output<S>>): Promise<H>;
  /** The sandbox as it is now (adopting it in a fresh worker), or null when it is gone. */
  get(ref: LeaseRef<z.output<S>>): Promise<H | null>;
  /** Ends the sandbox for good; resolves once confirmed; a gone sandbox is success. */
  destroy(ref: LeaseRef<z.output<S>>, handle: H | undefined): Promise<void>;
  /** Keeps a reusable sandbox's disk but ends its processes (and billing); confirmed. */
  stop?(handle: H, ref: LeaseRef<z.output<S>>): Promise<void>;
  /** Makes a stopped or frozen sandbox runnable again; returns the fresh handle. */
  start?(handle: H, ref: LeaseRef<z.output<S>>): Promise<H>;
  /** A cheap local check that a cached handle still stands for a live sandbox (else it is fetched again). */
  alive?(handle: H): boolean;
  /** True for a runner error that means "the sandbox is not running" (it is then started and the command retried once). */
  notRunning?(error: unknown): boolean;

  runner(handle: H, config: z.output<S>): ScriptRunner;
  /**
   * Reads and writes the reuse sentinel (`REUSE_SENTINEL_PATH` under the workspace) without the
   * runner, for a provider that can reach a stopped sandbox's disk safely (never following a link
   * the sandbox planted). Default: through the runner, inside the sandbox, after starting it.
   */
  sentinel?: {
    read(handle: H, config: z.output<S>): Promise<string | null>;
    write(handle: H, text: string, config: z.output<S>): Promise<void>;
  };
  /** The vendor file API for this sandbox; undefined when this sandbox has none (sync then goes over exec). */
  files?(handle: H, config: z.output<S>): FileTransport | undefined;
  /** Resources of this provider carrying all these labels (vendor-side listing). */
  list?(config: z.output<S>, labels: Record<string, string>): Promise<ListedResource[]>;

  probe?(config: z.output<S>, params: PluginEnvironmentProbeParams, hook: HookContext): Promise<PluginEnvironmentProbeResult>;
  /**
   * Checks beyond the schema (e.g. a path length); errors fail validation, warnings are shown. `raw`
   * is the config as the operator sent it, for a rule about a field given blank (blanks are unset
   * before the schema sees them).
   */
  validate?(config: z.output<S>, raw: Record<string, unknown>): { errors?: string[]; warnings?: string[] };
  /** Extra lease metadata (never secrets: the host stores it). */
  leaseMetadata?(handle: H, config: z.output<S>): Record<string, unknown>;
  /** Rewrites an execute's final stderr (e.g. a blocked-network note naming the refused destination). */
  annotateStderr?(handle: H, config: z.output<S>): ((stderr: string) => string) | undefined;
  /** Default command timeout when the host gives none. */
  defaultTimeoutMs?(config: z.output<S>): number | undefined;
  /** Called once in the plugin's `setup`, and at shutdown (for local handles, e.g. proxies). */
  setup?(ctx: PluginContext): Promise<void> | void;
  shutdown?(): Promise<void> | void;
  /** Sync through the file API even when the runner could stream (see `SyncForOptions.prefer`). */
  syncPrefer?: "file-api";
  /** Host-run concurrent sync operations are safe (declared to the host); default true. */
  concurrentSync?: boolean;
  /** How long a plain release waits for in-flight work before ending it; default 30 s. */
  releaseDrainMs?: number;
}
