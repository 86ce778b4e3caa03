import type { PluginEnvironmentProbeParams, PluginEnvironmentProbeResult } from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import type { ProviderConfig } from "../../config/define.js";
import { cappedTtlMs, SECOND_MS } from "../../lease/ttl-keeper.js";
import type { ListedResource } from "../../lease/lister.js";
import { defineSandboxProvider, type SandboxProvider } from "../../provider/define.js";
import { LeaseGoneError } from "../../provider/errors.js";
import type { TemplateContract } from "../../provider/template-contract.js";
import { isOwnedTemplateName, ownedTemplateName, templateNameOwner } from "../../provider/template-names.js";
import type { HookContext, SandboxHandle, TemplateDeclaration, WorkspaceDeclaration } from "../../provider/types.js";
import { STREAM_TRANSPORT, type FileTransport, type ScriptRunner } from "../../transport.js";
import { withRemoteGroupKill } from "../../transports/remote-group-kill.js";
import { createStreamedProcessRunner } from "../../transports/streamed-process-runner.js";
import { withCommandChannel } from "../../transports/command-channel/index.js";
import { ProviderApiError, isProviderApiError } from "../../vendor/api-error.js";
import { opaqueLeaseIdCodec } from "../../vendor/lease-id.js";
import { SANDBOX_NOT_RUNNING } from "./errors.js";
import { envdFileTransport } from "./file-transport.js";
import { envdPty } from "./pty.js";
import { envdProcessApi } from "./process-api.js";
import type { EnvdSandboxLike } from "./sdk-shapes.js";
import type { EnvdRpcEndpoint } from "./stream-input.js";

/** Sandbox metadata key holding the lease's hard deadline (epoch ms), so any worker can honour it. */
export const ENVD_EXPIRES_AT_KEY = "paperclip-expires-at";

/** What envd's process service carries: the whole streamed contract, and pseudo-terminals (`sandbox.pty`). */
export const ENVD_TRANSPORT = Object.freeze({ ...STREAM_TRANSPORT, pty: true });

/** What `info` reports about a sandbox. */
export interface EnvdSandboxInfo {
  state: "running" | "paused";
  metadata: Record<string, string>;
  startedAt?: Date;
  endAt?: Date;
}

export interface EnvdListedSandbox extends EnvdSandboxInfo {
  sandboxId: string;
}

/**
 * A vendor's control plane over its SDK, implemented by each E2B-family provider (`conn` is what
 * its SDK calls need: key, URLs, timeouts). Every method confirms before it resolves; a sandbox
 * that does not exist is `null` from `info`, success for `kill`, and a gone `ProviderApiError`
 * (`gone: true`) from `connect`, `setTimeout` and `pause`.
 */
export interface EnvdControlPlane<Conn> {
  create(conn: Conn, input: { template: string; timeoutMs: number; metadata: Record<string, string>; signal: AbortSignal }): Promise<EnvdSandboxLike>;
  info(conn: Conn, sandboxId: string): Promise<EnvdSandboxInfo | null>;
  /** A connected SDK sandbox. Resumes a paused one with `timeoutMs` from now; a running one's timeout only grows. */
  connect(conn: Conn, sandboxId: string, timeoutMs: number): Promise<EnvdSandboxLike>;
  /** The sandbox timeout, `timeoutMs` from now. */
  setTimeout(conn: Conn, sandboxId: string, timeoutMs: number): Promise<void>;
  /** Paused (memory and processes kept); already paused is success. */
  pause(conn: Conn, sandboxId: string): Promise<void>;
  kill(conn: Conn, sandboxId: string): Promise<void>;
  /** Sandboxes (running and paused) carrying all these metadata entries. */
  list(conn: Conn, metadata: Record<string, string>): Promise<EnvdListedSandbox[]>;
  /** Snapshot templates (custom images), for a vendor whose API names them. */
  snapshots?: EnvdSnapshots<Conn>;
}

/**
 * A vendor's snapshot templates: a snapshot of a sandbox's current state kept as a template that
 * later sandboxes are created from (E2B's `POST /sandboxes/{id}/snapshots`).
 */
export interface EnvdSnapshots<Conn> {
  /** Snapshots the sandbox under `name`; the ref a create names as its template (`team/name:tag`). */
  create(conn: Conn, sandboxId: string, name: string): Promise<string>;
  /** Whether the snapshot `ref` names (as `create` returned it) exists. */
  exists(conn: Conn, ref: string): Promise<boolean>;
  /** Deletes it; already gone is success. */
  delete(conn: Conn, ref: string): Promise<void>;
}

export interface EnvdProviderSpec<S extends z.ZodObject, Conn> {
  driverKey: string;
  /** Vendor name in errors (`e2b`, `novita`). */
  vendor: string;
  config: ProviderConfig<S>;
  /** The SDK connection for a config, reading credential fallbacks from `env`. */
  connection(config: z.output<S>, env: NodeJS.ProcessEnv): Conn;
  controlPlane: EnvdControlPlane<Conn>;
  template(config: z.output<S>): string;
  /** The sandbox timeout a held lease keeps alive (ms). */
  sandboxTimeoutMs(config: z.output<S>): number;
  /** Where the lease's workspace is (a fixed path, or a directory under `$HOME`). */
  workspace: WorkspaceDeclaration<EnvdHandle, z.output<S>>;
  /** Whether leases of this config are kept (paused) at release. */
  reusable(config: z.output<S>): boolean;
  /** A command's time limit when the host gives none (default: the sandbox timeout). */
  commandTimeoutMs?(config: z.output<S>): number;
  /** Config fields that shape the sandbox (a change means another sandbox). */
  shape(config: z.output<S>): Record<string, unknown>;
  /** The SDK's request timeout for one call (ms). */
  requestTimeoutMs(config: z.output<S>): number;
  /**
   * Where the SDK sends envd's Connect calls for a sandbox (`envdRpcEndpointOf`): given, a
   * process's stdin (the command channel's above all) travels in one `StreamInput` stream instead
   * of a `SendInput` call per write.
   */
  rpcEndpoint?(sandbox: EnvdSandboxLike): EnvdRpcEndpoint | undefined;
  /** How the SDK uploads bytes (see `envdFileTransport`). */
  upload: "stream" | "blob";
  /** The SDK bounds a whole download by its request timeout (Novita). */
  downloadTimeoutIsWholeBody?: boolean;
  /** A release that cannot pause kills the sandbox instead of failing (Novita's documented behaviour). */
  killWhenPauseFails?: boolean;
  validate?(config: z.output<S>): { errors?: string[]; warnings?: string[] };
  probe?(config: z.output<S>, params: PluginEnvironmentProbeParams, hook: HookContext): Promise<PluginEnvironmentProbeResult>;
  /**
   * A held lease with no command, sync or channel for this long is not kept alive any more (a host
   * that never releases must not keep a sandbox running forever). Default the larger of 1 hour and
   * the sandbox timeout.
   */
  idleKeepaliveMs?(config: z.output<S>): number;
  /** For tests: the clock of lease deadlines. */
  now?: () => number;
  /**
   * Custom images (needs `controlPlane.snapshots`): the contract the manifest states. A template is a
   * vendor snapshot of the setup sandbox whose name carries its owner (`ownedTemplateName`); its ref
   * goes into `configField`, which `template(config)` must return.
   */
  templates?: TemplateContract;
}

/** What the kit keeps per lease. `sandbox` is the connected SDK object; absent while paused. */
export interface EnvdHandle extends SandboxHandle {
  sandboxId: string;
  sandbox?: EnvdSandboxLike;
  /** The lease's hard deadline (epoch ms), or null. */
  capAt: number | null;
}

/**
 * An E2B-family sandbox provider (e2b, novita) on the kit's lifecycle layer, from its control plane:
 * - acquire creates the sandbox with its labels as metadata and a timeout that ends at or before
 *   the host's `requestedExpiresAt` (stored in the metadata, so a later worker honours it too), and
 *   makes the workspace;
 * - while the worker holds a lease its sandbox timeout is refreshed on a timer (never past the
 *   deadline), so a plain execute stays one process start;
 * - executes run through envd's process service with streamed stdin, the whole process group ended
 *   on abort or timeout (envd signals only a pid); sync moves archives through envd's file API;
 * - a reusable lease is paused at release (memory and processes kept) and resumed with `connect`,
 *   always given the lease's own timeout (the SDK's default would reset it to 300 s), otherwise the
 *   sandbox is killed; a sandbox found past its deadline is killed and reported gone.
 */
export function defineEnvdSandboxProvider<S extends z.ZodObject, Conn>(spec: EnvdProviderSpec<S, Conn>): SandboxProvider {
  type C = z.output<S>;
  const cp = spec.controlPlane;
  const now = spec.now ?? Date.now;
  const ids = opaqueLeaseIdCodec({ vendor: spec.vendor });
  let log: (message: string) => void = () => undefined;
  const conn = (config: C, env: NodeJS.ProcessEnv = process.env) => spec.connection(config, env);

  const timeoutFor = (config: C, capAt: number | null) => cappedTtlMs(spec.sandboxTimeoutMs(config), capAt, { granularityMs: SECOND_MS, now: now() });

  const notRunningError = (id: string) =>
    new ProviderApiError({
      vendor: spec.vendor,
      operation: "process.Start",
      status: 502,
      code: SANDBOX_NOT_RUNNING,
      detail: `sandbox ${id} is not running`,
      retryable: false,
      gone: false,
      mayHaveTakenEffect: false,
    });

  const runnerOf = (handle: EnvdHandle, config: C): ScriptRunner => {
    const sandbox = handle.sandbox;
    if (!sandbox) {
      const refuse = () => Promise.reject(notRunningError(handle.sandboxId));
      return { capabilities: ENVD_TRANSPORT, run: refuse, pty: { open: refuse } };
    }
    const rpcEndpoint = spec.rpcEndpoint?.(sandbox);
    const api = envdProcessApi(sandbox, { vendor: spec.vendor, requestTimeoutMs: spec.requestTimeoutMs(config), ...(rpcEndpoint ? { rpcEndpoint } : {}) });
    const runner = withCommandChannel(withRemoteGroupKill(createStreamedProcessRunner({ api })), { lease: handle.providerLeaseId, signalsAsExitStatus: true });
    const pty = envdPty(sandbox, { vendor: spec.vendor, requestTimeoutMs: spec.requestTimeoutMs(config) });
    return { capabilities: ENVD_TRANSPORT, run: (script, io) => runner.run(script, io), pty };
  };

  const filesOf = (handle: EnvdHandle, config: C): FileTransport => {
    const sandbox = handle.sandbox;
    if (!sandbox) {
      const refuse = () => Promise.reject(notRunningError(handle.sandboxId));
      return { upload: refuse, download: refuse };
    }
    return envdFileTransport(sandbox.files, {
      vendor: spec.vendor,
      upload: spec.upload,
      requestTimeoutMs: spec.requestTimeoutMs(config),
      ...(spec.downloadTimeoutIsWholeBody ? { downloadTimeoutIsWholeBody: true } : {}),
    });
  };

  const capOf = (metadata: Record<string, string>): number | null => {
    const raw = metadata[ENVD_EXPIRES_AT_KEY];
    const value = raw === undefined ? NaN : Number(raw);
    return Number.isFinite(value) && value > 0 ? value : null;
  };

  const connected = async (config: C, handle: EnvdHandle): Promise<EnvdHandle> => {
    const timeoutMs = timeoutFor(config, handle.capAt);
    if (timeoutMs <= 0) throw new LeaseGoneError(`${spec.driverKey} lease ${handle.sandboxId} reached its deadline`);
    const sandbox = await cp.connect(conn(config), handle.sandboxId, timeoutMs);
    return { ...handle, sandbox, state: "running" };
  };

  return defineSandboxProvider({
    driverKey: spec.driverKey,
    config: spec.config,
    transport: ENVD_TRANSPORT,
    workspace: spec.workspace,
    shape: spec.shape,
    leaseMetadata: (handle) => ({ sandboxId: handle.sandboxId }),
    ...(spec.validate ? { validate: spec.validate } : {}),
    ...(spec.probe ? { probe: spec.probe } : {}),
    options: {
      // Each stdin chunk of envd's process API is a call of its own; its file API moves a whole archive in one.
      syncPrefer: "file-api",
      commandTimeoutMs: spec.commandTimeoutMs ?? spec.sandboxTimeoutMs,
    },
    keep: { reusable: spec.reusable, by: "stop" },
    // A held lease's timeout is refreshed every third of it (never past the lease's deadline), so a
    // plain execute stays one process start.
    keepAlive: {
      ttlMs: spec.sandboxTimeoutMs,
      refresh: (handle, config, ms) => cp.setTimeout(conn(config), handle.sandboxId, ms),
      idleMs: (config) => spec.idleKeepaliveMs?.(config) ?? Math.max(60 * 60_000, spec.sandboxTimeoutMs(config)),
    },
    setup(ctx) {
      log = (message) => ctx.logger?.warn(message);
    },

    async create({ config, labels, expiresAt, created, signal }) {
      const capAt = expiresAt ? expiresAt.getTime() : null;
      const timeoutMs = timeoutFor(config, capAt);
      if (timeoutMs <= 0) throw new Error(`${spec.driverKey}: the requested expiry is less than a second away; no sandbox can be bounded by it`);
      const metadata: Record<string, string> = { ...labels, ...(capAt !== null ? { [ENVD_EXPIRES_AT_KEY]: String(capAt) } : {}) };
      const sandbox = await cp.create(conn(config), { template: spec.template(config), timeoutMs, metadata, signal });
      const sandboxId = ids.encode(sandbox.sandboxId);
      created(sandboxId);
      const handle: EnvdHandle = {
        providerLeaseId: sandboxId,
        sandboxId,
        sandbox,
        capAt,
        expiresAt: capAt === null ? null : new Date(capAt),
        state: "running",
        labels: metadata,
      };
      return handle;
    },

    async get(ref) {
      const id = ids.tryDecode(ref.providerLeaseId);
      if (id === undefined) return null;
      const info = await cp.info(conn(ref.config), id);
      if (!info) return null;
      const capAt = capOf(info.metadata);
      const handle: EnvdHandle = {
        providerLeaseId: id,
        sandboxId: id,
        capAt,
        expiresAt: capAt === null ? null : new Date(capAt),
        state: info.state === "paused" ? "frozen" : "running",
        labels: info.metadata,
      };
      // Past the lease's deadline (the kit destroys it) or paused: not connected. A running sandbox
      // needs a connected SDK object (its envd access token): connect, which only ever extends a
      // running sandbox's timeout.
      return info.state === "paused" || (capAt !== null && capAt <= now()) ? handle : connected(ref.config, handle);
    },

    destroy: (ref, handle) => cp.kill(conn(ref.config), handle.sandboxId),

    async stop(handle, ref) {
      try {
        await cp.pause(conn(ref.config), handle.sandboxId);
      } catch (error) {
        if (isProviderApiError(error) && error.gone) return;
        if (!spec.killWhenPauseFails) throw error;
        log(`${spec.driverKey}: pausing sandbox ${handle.sandboxId} failed (${(error as Error).message}); killing it instead`);
        await cp.kill(conn(ref.config), handle.sandboxId);
      }
    },

    start: (handle, ref) => connected(ref.config, handle),
    alive: (handle) => handle.sandbox !== undefined,
    notRunning: (error) => isProviderApiError(error) && error.code === SANDBOX_NOT_RUNNING,
    runner: runnerOf,
    files: filesOf,

    async list(config, labels, { env }) {
      return (await cp.list(conn(config, env), labels)).map(listedResource);
    },
    ...(spec.templates && cp.snapshots ? { templates: envdTemplates(spec.templates, cp.snapshots, (config: C) => conn(config)) } : {}),
  });
}

/** The snapshot's own name in a ref: `team/name:tag` → `name`. */
const snapshotNameOf = (ref: string): string => ref.replace(/:[^/:]*$/, "").replace(/^.*\//, "");

function envdTemplates<C, Conn>(contract: TemplateContract, snapshots: EnvdSnapshots<Conn>, conn: (config: C) => Conn): TemplateDeclaration<EnvdHandle, C> {
  return {
    ...contract,
    isTemplateRef: (value) => isOwnedTemplateName(snapshotNameOf(value)),
    async capture(handle, ref, { labels }) {
      return { templateRef: await snapshots.create(conn(ref.config), handle.sandboxId, ownedTemplateName(labels)) };
    },
    async labels(templateRef, config, expected) {
      const owner = templateNameOwner(snapshotNameOf(templateRef), expected);
      return owner && (await snapshots.exists(conn(config), templateRef)) ? owner : null;
    },
    delete: (templateRef, config) => snapshots.delete(conn(config), templateRef),
  };
}

function listedResource(sandbox: EnvdListedSandbox): ListedResource {
  const capRaw = Number(sandbox.metadata[ENVD_EXPIRES_AT_KEY]);
  const cap = Number.isFinite(capRaw) && capRaw > 0 ? new Date(capRaw).toISOString() : null;
  return {
    providerLeaseId: sandbox.sandboxId,
    labels: sandbox.metadata,
    ...(sandbox.startedAt ? { createdAt: sandbox.startedAt.toISOString() } : {}),
    // A running sandbox ends at its timeout at the latest; a paused one only at the lease's deadline.
    expiresAt: cap ?? (sandbox.state === "running" && sandbox.endAt ? sandbox.endAt.toISOString() : null),
    state: sandbox.state,
    metadata: { sandboxId: sandbox.sandboxId },
  };
}
