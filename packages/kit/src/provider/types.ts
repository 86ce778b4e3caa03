import type {
  PluginContext,
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentInteractiveSetupConnectionPayload,
  PluginEnvironmentInteractiveSetupConnectionSummary,
  PluginEnvironmentProbeParams,
  PluginEnvironmentProbeResult,
} from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import type { ProviderConfig } from "../config/define.js";
import type { EgressGrant } from "../egress/grant.js";
import type { LeaseLabels } from "../lease/labels.js";
import type { ListedResource } from "../lease/lister.js";
import type { FileTransport, ScriptRunner, TransportCapabilities } from "../transport.js";
import type { TemplateContract } from "./template-contract.js";

/** What a provider knows about one of its sandboxes; the kit keeps it per lease in the worker. */
export interface SandboxHandle {
  /** The host's `providerLeaseId` for this sandbox (usually the vendor id, validated by the provider). */
  providerLeaseId: string;
  /** When the vendor (or the local engine) ends the sandbox, if it bounds it. Past: the kit treats it as gone. */
  expiresAt?: Date | null;
  /**
   * `running` unless the provider knows better: `stopped`/`frozen` is started before use; `ended`
   * is still at the vendor but will never run again (failed, or a create that died half-way): gone
   * to every hook, and destroyed when it is the caller's.
   */
  state?: "running" | "stopped" | "frozen" | "ended";
  /**
   * The resource's labels at the vendor, as `create` was given them. The kit destroys, keeps or
   * resumes a resource only when they name this provider and the lease's company and environment.
   */
  labels: Readonly<Record<string, string>>;
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
  /** provider, company, environment and run labels (values already fit label rules): put them on the resource. */
  labels: LeaseLabels;
  /** The provider must end the sandbox at or before this (its TTL and the host's requested deadline), or say it cannot. */
  expiresAt: Date | null;
  /** Identity of the acquire and the sandbox's shape (also written to the reuse sentinel). */
  fingerprint: string;
  /** The lease will be kept at release (see `keep`). */
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

/**
 * Where a lease's workspace (`metadata.remoteCwd`) is. The kit makes it through the runner right
 * after `create` (one call), unless it exists already:
 * - `path`: an absolute path (`mkdir -p`);
 * - `homeSubdir`: a directory under the sandbox user's `$HOME`, whose real path is read back;
 * - `existing`: a directory `create` made (or the image has), named from the handle; no call.
 * `syncRoots` names directories besides the workspace that sync may touch.
 */
export type WorkspaceDeclaration<H, C> = ({ path: string | ((config: C) => string) } | { homeSubdir: string | ((config: C) => string) } | { existing(handle: H, config: C): string }) & {
  syncRoots?(handle: H, config: C): string[];
};

/**
 * How a kept lease waits for its next run: `stop` calls the provider's `stop` (processes and
 * billing end, the disk stays); `leave-running` calls nothing (the sandbox runs on, billed while idle).
 */
export type KeepMode = "stop" | "leave-running";

export interface KeepDeclaration<H, C> {
  /** Whether leases of this config are kept at release (usually the host-owned `reuseLease` flag). */
  reusable(config: C): boolean;
  /** How; a function when it depends on how the lease was made. */
  by: KeepMode | ((handle: H, config: C) => KeepMode);
}

/** How a setup sandbox is reached (a `connectionTypes` entry); the payload is the host's to hand over, never logged. */
export interface SetupConnection {
  summary: PluginEnvironmentInteractiveSetupConnectionSummary;
  payload: PluginEnvironmentInteractiveSetupConnectionPayload;
}

/**
 * Custom images: the contract the manifest states, and the provider's part of it. The kit writes the
 * five hooks (setup start/get/cancel, capture, delete): a setup sandbox is an ordinary lease (the
 * setup's acquire, ownership before every call, destroyed on cancel); a ref named in the config's
 * `configField` is checked to be this company's and environment's before `create` starts from it.
 */
export interface TemplateDeclaration<H, C> extends TemplateContract {
  /** Captures the running sandbox into a new template carrying `labels` (its owner); resolves once it is usable. */
  capture(
    handle: H,
    ref: LeaseRef<C>,
    input: { labels: Readonly<Record<string, string>>; label: string | null; signal: AbortSignal },
  ): Promise<{ templateRef: string; metadata?: Record<string, unknown> }>;
  /**
   * Whether a value of the bound config field names one of this provider's captured templates; a
   * value that does not (a vendor snapshot the operator chose, when the field is also the vendor's
   * own) is started from as it is, unchecked. Absent: every value is a template ref, checked.
   */
  isTemplateRef?(value: string): boolean;
  /**
   * The labels `capture` gave a template; null when this config's store has no such template (or the ref is not one).
   * `expected` is the owner the kit is about to check them against (provider, company, environment labels), for a
   * vendor that keeps no labels on a template and records its owner another way (e.g. a digest in its name).
   */
  labels(templateRef: string, config: C, expected: Readonly<Record<string, string>>): Promise<Readonly<Record<string, string>> | null>;
  /** Deletes a template (called only for one the kit checked is the caller's); needed when `deletes`. */
  delete?(templateRef: string, config: C): Promise<void>;
  /** The connection to a setup sandbox, for a provider that offers one (`connectionTypes`). */
  connection?(handle: H, config: C, input: { expiresAt: Date | null; minutes: number | null }): Promise<SetupConnection | null>;
}

/** Tuning with defaults; every member optional. */
export interface ProviderOptions<C> {
  /** The provider's own lifetime for a lease (ms), bounded further by the host's requested deadline. */
  ttlMs?(config: C): number | null | undefined;
  /** A command's time limit when the host gives none (ms); absent: none. */
  commandTimeoutMs?(config: C): number | undefined;
  /** How long acquire may take before the kit gives up and cleans up (default: the host's deadline for the call, minus a margin). */
  acquireBudgetMs?(config: C): number;
  /** How long a plain release waits for in-flight work before ending it; default 30 s. */
  releaseDrainMs?: number;
  /**
   * Sync through the file API even when the runner could stream (see `SyncForOptions.prefer`); an
   * operation that finds the lease's command channel ready streams over it instead (no vendor call).
   */
  syncPrefer?: "file-api";
  /** Host-run concurrent sync operations are safe (declared to the host); default true. */
  concurrentSync?: boolean;
}

/** Where `list` runs: inside the worker (no `env`: use your own), or for `leases gc` in the CLI. */
export interface ListContext {
  /** The environment the worker would see (credential fallbacks), when listing outside the worker. */
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

/**
 * A sandbox provider, declared: the kit writes every Paperclip hook from this (see
 * `defineSandboxProvider`). Everything a vendor call can confirm must be confirmed before the
 * function resolves: `destroy` resolves only once the sandbox is gone, `stop` once it is stopped.
 *
 * The kit, not the provider: runs `validate` before `create` and before `probe`; checks ownership
 * (labels naming provider, company and environment) before every destroy, keep and resume; makes
 * the workspace; derives `listLeases` (for `leases gc`) from `list`.
 */
export interface SandboxProviderDefinition<S extends z.ZodObject, H extends SandboxHandle> {
  driverKey: string;
  config: ProviderConfig<S>;
  /** What `runner(handle)` can do; declared statically because the manifest is. */
  transport: TransportCapabilities;
  /** The lease's working directory (`metadata.remoteCwd`; the host empties /tmp without it). */
  workspace: WorkspaceDeclaration<H, z.output<S>>;
  /** Config fields that shape the sandbox (image, size, ...): a change means another sandbox. */
  shape(config: z.output<S>): Record<string, unknown>;

  /** Makes the sandbox, labelled with `input.labels`, running. */
  create(input: CreateInput<z.output<S>>): Promise<H>;
  /** The sandbox as the vendor has it now, whatever its state (expired and `ended` included); null only when the vendor no longer has it. */
  get(ref: LeaseRef<z.output<S>>): Promise<H | null>;
  /** Ends the sandbox for good; resolves once confirmed; gone meanwhile is success. Called only for a resource the kit checked is the caller's. */
  destroy(ref: LeaseRef<z.output<S>>, handle: H): Promise<void>;
  runner(handle: H, config: z.output<S>): ScriptRunner;

  /** Leases of a reusable config are kept at release instead of destroyed (`reusableLeases` in the manifest). */
  keep?: KeepDeclaration<H, z.output<S>>;
  /** Ends a kept sandbox's processes (and billing), keeping its disk; confirmed. Needed for `keep.by: "stop"`. */
  stop?(handle: H, ref: LeaseRef<z.output<S>>): Promise<void>;
  /**
   * Makes a stopped or frozen sandbox runnable again; returns the fresh handle. The kit bounds it by
   * the call's budget (`acquireBudgetMs`); `signal` aborts when that ends, so its waits stop then.
   */
  start?(handle: H, ref: LeaseRef<z.output<S>>, signal: AbortSignal): Promise<H>;
  /** A cheap local check that a held handle still stands for a live sandbox (else it is fetched again). */
  alive?(handle: H): boolean;
  /** True for a runner error that means "the sandbox is not running" (it is then started and the command retried once). */
  notRunning?(error: unknown): boolean;

  /** The vendor file API for this sandbox; undefined when this sandbox has none (sync then goes over exec). */
  files?(handle: H, config: z.output<S>): FileTransport | undefined;
  /** Resources of this provider carrying all these labels, whatever their state (lost creates, `leases gc`). */
  list?(config: z.output<S>, labels: Record<string, string>, context: ListContext): Promise<ListedResource[]>;
  /**
   * Reads and writes the reuse sentinel (`REUSE_SENTINEL_PATH` under the workspace) without the
   * runner, for a provider that can reach a stopped sandbox's disk safely (never following a link
   * the sandbox planted). Default: through the runner, inside the sandbox, after starting it.
   */
  sentinel?: {
    read(handle: H, config: z.output<S>): Promise<string | null>;
    write(handle: H, text: string, config: z.output<S>): Promise<void>;
  };

  /**
   * Checks beyond the schema (across fields, credentials); errors fail validation, acquire and probe.
   * `raw` (validation only) is the config as the operator sent it, for a rule about a field given
   * blank (blanks are unset before the schema sees them).
   */
  validate?(config: z.output<S>, raw?: Record<string, unknown>): { errors?: string[]; warnings?: string[] };
  /** Default: create a small sandbox, run a command, destroy it. */
  probe?(config: z.output<S>, params: PluginEnvironmentProbeParams, hook: HookContext): Promise<PluginEnvironmentProbeResult>;
  /** The provider enforces egress grants: the config's lists (the kit merges the task's in). */
  egress?(config: z.output<S>): EgressGrant;
  /** Extra lease metadata (never secrets: the host stores it). */
  leaseMetadata?(handle: H, config: z.output<S>): Record<string, unknown>;
  /** Rewrites an execute's final stderr (e.g. a blocked-network note naming the refused destination). */
  annotateStderr?(handle: H, config: z.output<S>): ((stderr: string) => string) | undefined;
  /**
   * A vendor whose sandboxes end after a timeout (an idle TTL): while this worker holds a lease and
   * it is in use, the kit refreshes it every third of `ttlMs`, never past the handle's `expiresAt`
   * (the lease's hard deadline). Nothing per execute.
   */
  keepAlive?: {
    /** The timeout a refresh sets (ms). */
    ttlMs(config: z.output<S>): number;
    /** Sets the sandbox's timeout to `ms` from now (a gone answer stops the refreshes). */
    refresh(handle: H, config: z.output<S>, ms: number): Promise<void>;
    /** A held lease with no work for this long is left to its timeout (default the larger of 1 h and `ttlMs`). */
    idleMs?(config: z.output<S>): number;
  };
  /** Custom images (interactive setup, template capture and delete); absent: the host offers none. */
  templates?: TemplateDeclaration<H, z.output<S>>;
  /** Called once in the plugin's `setup`, and at shutdown (for local handles, e.g. proxies). */
  setup?(ctx: PluginContext): Promise<void> | void;
  shutdown?(): Promise<void> | void;
  options?: ProviderOptions<z.output<S>>;
}
