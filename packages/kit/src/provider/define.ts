import {
  definePlugin,
  type PaperclipPlugin,
  type PluginContext,
  type PluginEnvironmentDriverBaseParams,
  type PluginEnvironmentLease,
  type PluginEnvironmentReleaseLeaseParams,
  type PluginEnvironmentTerminationReceipt,
} from "@paperclipai/plugin-sdk";
import type { z } from "zod";
import { ConfigError } from "../config/errors.js";
import { secretFieldPaths } from "../config/secret-paths.js";
import { createDuplexChannels } from "../duplex/duplex-channels.js";
import { executeCommand } from "../exec/execute.js";
import { LoginPtyError } from "../login/login-command.js";
import { createLoginPtys } from "../login/login-ptys.js";
import { closeAllCommandChannels, closeCommandChannel, commandChannelCarriesSync, setCommandChannelLog } from "../transports/command-channel/index.js";
import { labelValue } from "../lease/labels.js";
import { createTtlKeepers } from "../lease/ttl-keeper.js";
import { defineLeaseLister, type ProviderLeaseLister } from "../lease/lister.js";
import { assertOwnedBy, ownershipMismatches } from "../lease/ownership.js";
import { buildSentinel, sentinelNamesFingerprint } from "../lease/sentinel.js";
import { execRequestFrom } from "../plugin/exec-request.js";
import { probeResult } from "../probe/summary.js";
import { createRedactor, type Redactor } from "../redact/redactor.js";
import { syncFor, type SyncStrategy } from "../sync/sync-for.js";
import { isProviderApiError } from "../vendor/api-error.js";
import { createWithinBudget, lifecycleBudgetMs, planAcquire, shapeFingerprintOf, startWithinBudget, type AcquirePlan } from "./acquire.js";
import { deriveSandboxCapabilities, supportsDuplex, supportsLoginPty, type DerivedSandboxCapabilities } from "./capabilities.js";
import { LeaseGoneError, redactedError, secretValuesOf } from "./errors.js";
import { LeaseRegistry, type LeaseEntry } from "./lease-registry.js";
import { defaultProbe } from "../probe/default-probe.js";
import { sentinelHolds, writeSentinelVia } from "./sentinel-io.js";
import type { KeepMode, LeaseRef, SandboxHandle, SandboxProviderDefinition } from "./types.js";
import type { TransportCapabilities } from "../transport.js";
import { knownWorkspace, makeWorkspace } from "./workspace.js";
import { templateContractProblems } from "./template-contract.js";
import { createTemplateHooks } from "./templates.js";
import { createSshSetupGateway, type SshSetupGateway } from "../setup-terminal/ssh-gateway.js";

const DEFAULT_RELEASE_DRAIN_MS = 30_000;

export interface SandboxProvider {
  /** The Paperclip plugin: `export default provider.plugin` from `plugin.ts`, `runWorker` it from `worker.ts`. */
  plugin: PaperclipPlugin;
  /** For `leases gc`, derived from `list` (without one it lists nothing): export it as `listLeases` from the package's main module. */
  listLeases: ProviderLeaseLister;
  /** For the manifest's driver declaration. */
  sandboxCapabilities: DerivedSandboxCapabilities;
  supportsReusableLeases: boolean;
  /** The manifest's `supportsLoginPty`: the transport opens pseudo-terminals, so the login hooks exist. */
  supportsLoginPty: boolean;
  /** The definition declares custom images (`templates`): the five setup/capture/delete hooks exist. */
  supportsTemplates: boolean;
}

/** Release dispositions of newer hosts (2026.1005.0); absent on 2026.916.1. */
type Disposition = "keep_running" | "stop_and_retain" | "destroy";

/**
 * Writes every environment hook of a sandbox-provider plugin from a declaration: validation, probe,
 * acquire (validate, labels, fingerprint, expiry, budget, workspace, clean-up of half-made
 * sandboxes), resume (expired and identity-mismatch shapes, sentinel check, restart of a stopped
 * sandbox), release and destroy (ownership checked, drain or cancel, keep or destroy, receipts only
 * after the provider confirms), realize, execute, sync (strategy by transport), duplex channels
 * (only over a transport that can carry them), and the lease listing for `leases gc`.
 */
export function defineSandboxProvider<S extends z.ZodObject, H extends SandboxHandle>(def: SandboxProviderDefinition<S, H>): SandboxProvider {
  type C = z.output<S>;
  const keepers = createTtlKeepers();
  const registry = new LeaseRegistry<H, C>({ held: (entry) => keepAlive(entry), released: (id) => keepers.stop(id) });
  const secretPaths = secretFieldPaths(def.config.jsonSchema);
  let ctx: PluginContext | undefined;
  const log = (message: string) => ctx?.logger?.warn(message);
  const info = (message: string) => ctx?.logger?.info(message);
  const duplexOk = supportsDuplex(def.transport);
  if (def.keep && typeof def.keep.by === "string" && def.keep.by === "stop" && !def.stop) {
    throw new TypeError(`${def.driverKey}: keep.by "stop" needs a stop function`);
  }

  /** One keeper per held lease, judging "in use" by the same work the registry drains. */
  function keepAlive(entry: LeaseEntry<H, C>): void {
    const spec = def.keepAlive;
    if (!spec) return;
    const id = entry.providerLeaseId;
    const ttlMs = spec.ttlMs(entry.config);
    const idleMs = spec.idleMs?.(entry.config) ?? Math.max(60 * 60_000, ttlMs);
    keepers.keep(id, {
      ttlMs,
      capAt: entry.handle.expiresAt?.getTime() ?? null,
      active: () => entry.work.size > 0 || Date.now() - entry.lastActive < idleMs,
      refresh: (ms) => spec.refresh(entry.handle, entry.config, ms),
      onError: (error) => {
        if (isProviderApiError(error) && error.gone) keepers.stop(id);
        log(`${def.driverKey}: refreshing the timeout of sandbox ${id} failed: ${(error as Error).message}`);
      },
    });
  }

  const parse = (raw: unknown): { config: C; redact: Redactor } => {
    const config = def.config.parse(raw);
    return { config, redact: createRedactor(secretValuesOf(config, secretPaths)) };
  };

  /** Runs a hook body; anything it throws reaches the host without the config's secrets. */
  const guarded = async <T>(raw: unknown, body: (config: C) => Promise<T>): Promise<T> => {
    let redact: Redactor = (text) => text;
    try {
      const parsed = parse(raw);
      redact = parsed.redact;
      return await body(parsed.config);
    } catch (error) {
      throw redactedError(error, redact);
    }
  };

  /** The provider's checks beyond the schema; acquire and probe run only a config that passes them. */
  const problemsOf = (config: C): string[] => def.validate?.(config).errors ?? [];

  const refOf = (params: PluginEnvironmentDriverBaseParams, providerLeaseId: string, config: C, metadata: Record<string, unknown> | undefined): LeaseRef<C> => ({
    providerLeaseId,
    config,
    metadata: metadata ?? {},
    companyId: params.companyId,
    environmentId: params.environmentId,
  });

  const entryFor = (handle: H, ref: LeaseRef<C>, workspace: string | undefined): LeaseEntry<H, C> => ({
    providerLeaseId: handle.providerLeaseId,
    handle,
    config: ref.config,
    metadata: ref.metadata,
    workspace,
    files: def.files?.(handle, ref.config),
    sync: undefined,
    work: new Set(),
    lastActive: Date.now(),
    abort: new AbortController(),
  });

  // Made per use from the latest config (cheap: providers keep their clients on the handle).
  const runnerOf = (entry: Pick<LeaseEntry<H, C>, "handle" | "config">) => def.runner(entry.handle, entry.config);

  const expired = (handle: H) => handle.expiresAt instanceof Date && handle.expiresAt.getTime() <= Date.now();
  /** Still at the vendor, but never to run again: gone to every hook but destroy. */
  const unusable = (handle: H) => handle.state === "ended" || expired(handle);
  const owner = (ref: Pick<LeaseRef<C>, "companyId" | "environmentId">) => ({ driverKey: def.driverKey, companyId: ref.companyId, environmentId: ref.environmentId });
  const ownedBy = (handle: H, ref: Pick<LeaseRef<C>, "companyId" | "environmentId">) => ownershipMismatches(handle.labels, owner(ref)).length === 0;
  /** Strict: the resource's labels must name this provider, the lease's company and its environment. */
  const assertOwned = (handle: H, ref: Pick<LeaseRef<C>, "companyId" | "environmentId">) =>
    assertOwnedBy(handle.labels, owner(ref), { resource: `${def.driverKey} sandbox ${handle.providerLeaseId}` });
  const keepModeOf = (handle: H, config: C): KeepMode => {
    const by = def.keep!.by;
    return typeof by === "function" ? by(handle, config) : by;
  };

  const workspaceOf = async (entry: LeaseEntry<H, C>): Promise<string> =>
    (entry.workspace ??= await makeWorkspace(def.workspace, entry.handle, entry.config, () => runnerOf(entry), entry.abort.signal));
  const syncRootsOf = (entry: LeaseEntry<H, C>, workspace: string) => [workspace, ...(def.workspace.syncRoots?.(entry.handle, entry.config) ?? [])];
  const prefer = def.options?.syncPrefer;
  // Where the file API is preferred, an operation that finds the lease's command channel ready
  // streams over it instead: no vendor call, where the file API costs one per operation.
  const syncOf = (entry: LeaseEntry<H, C>): SyncStrategy =>
    (entry.sync ??= syncFor(() => runnerOf(entry), entry.files, prefer ? { prefer, streamsFree: () => commandChannelCarriesSync(entry.providerLeaseId) } : {}));

  /** Starts a stopped sandbox within the budget of the host's call (its raw config holds the host's `timeoutMs`). */
  const startBounded = (start: NonNullable<typeof def.start>, handle: H, ref: LeaseRef<C>, rawConfig: unknown): Promise<H> =>
    startWithinBudget(def.driverKey, start, handle, ref, lifecycleBudgetMs(def, ref.config, rawConfig));

  /** The lease a hook works on: held by this worker, or looked up (checked, started when stopped). */
  const activeLease = async (params: PluginEnvironmentDriverBaseParams, lease: PluginEnvironmentLease, config: C): Promise<LeaseEntry<H, C>> => {
    const id = lease.providerLeaseId;
    if (!id) throw new LeaseGoneError("this lease has no providerLeaseId (it was never acquired, or it expired)");
    const held = registry.held(id);
    if (held && (def.alive ? def.alive(held.handle) : true) && !unusable(held.handle)) {
      held.config = config;
      return held;
    }
    if (held) registry.forget(id);
    return registry.obtain(id, async () => {
      const ref = refOf(params, id, config, lease.metadata);
      let handle = await def.get(ref);
      if (!handle || unusable(handle)) throw new LeaseGoneError(`${def.driverKey} lease ${id} is not running (released, destroyed or expired)`);
      assertOwned(handle, ref);
      if (handle.state !== undefined && handle.state !== "running") {
        if (!def.start) throw new LeaseGoneError(`${def.driverKey} lease ${id} is ${handle.state}`);
        handle = await startBounded(def.start, handle, ref, params.config);
      }
      const entry = entryFor(handle, ref, knownWorkspace(def.workspace, handle, config, ref.metadata));
      await workspaceOf(entry);
      return entry;
    });
  };

  /** Runs `work` once; if the provider says the sandbox was not running, starts it and runs it once more. */
  const retryAfterStart = async <T>(entry: LeaseEntry<H, C>, params: PluginEnvironmentDriverBaseParams, work: (entry: LeaseEntry<H, C>) => Promise<T>): Promise<T> => {
    try {
      return await work(entry);
    } catch (error) {
      if (!def.notRunning?.(error) || !def.start || entry.abort.signal.aborted) throw error;
      const ref = refOf(params, entry.providerLeaseId, entry.config, entry.metadata);
      const started = entryFor(await startBounded(def.start, entry.handle, ref, params.config), ref, entry.workspace);
      registry.set(started);
      return work(started);
    }
  };

  const leaseResult = (
    entry: LeaseEntry<H, C>,
    workspace: string,
    plan: Pick<AcquirePlan, "fingerprint" | "shapeFingerprint" | "reusable" | "grant">,
    requested: string | null | undefined,
  ): PluginEnvironmentLease => {
    const handle = entry.handle;
    let expiresAt: string | null = handle.expiresAt ? handle.expiresAt.toISOString() : null;
    // The host fails closed without an expiry: never claim one later than what it asked for.
    if (requested && (!handle.expiresAt || handle.expiresAt.getTime() > Date.parse(requested))) {
      log(`${def.driverKey}: the sandbox could not be bounded at or before ${requested}; returning no expiry`);
      expiresAt = null;
    }
    return {
      providerLeaseId: handle.providerLeaseId,
      expiresAt,
      metadata: {
        ...(def.leaseMetadata?.(handle, entry.config) ?? {}),
        remoteCwd: workspace,
        fingerprint: plan.fingerprint,
        shapeFingerprint: plan.shapeFingerprint,
        reusable: plan.reusable,
        ...(plan.grant ? { egress: plan.grant } : {}),
      },
    };
  };

  const duplex = duplexOk
    ? createDuplexChannels({
        // Opens carry no config: only a lease this worker serves can have a channel (the run's
        // executes always reach it first).
        runnerFor: async ({ providerLeaseId }) => {
          const entry = registry.held(providerLeaseId);
          if (!entry) throw new LeaseGoneError(`${def.driverKey} lease ${providerLeaseId} is not held by this worker`);
          const runner = runnerOf(entry);
          // The declared transport is the provider's best; this lease's runner may be weaker (e.g. a
          // vendor endpoint without streams) and then cannot carry a channel.
          if (!supportsDuplex(runner.capabilities)) {
            throw new Error(`${def.driverKey} lease ${providerLeaseId}: its transport cannot carry a duplex channel (it needs streamed stdin with EOF and binary-safe live output)`);
          }
          // A channel's command is the lease's work like an execute (release drains it; it keeps the lease alive).
          return { runner: { capabilities: runner.capabilities, run: (script, io) => registry.track(entry, runner.run(script, io)) }, leaseSignal: entry.abort.signal };
        },
        notify: () => ctx?.duplexChannel,
        log: (message) => log(message),
      })
    : undefined;

  const login = supportsLoginPty(def.transport)
    ? createLoginPtys({
        // Opens carry no config: the login runs on the lease the host acquired for it, in this worker.
        leaseFor: async (scope) => {
          const entry = registry.held(scope.providerLeaseId);
          if (!entry) throw new LeaseGoneError(`${def.driverKey} lease ${scope.providerLeaseId} is not held by this worker`);
          assertOwned(entry.handle, scope);
          // A kept sandbox may hold an earlier login's files: a login gets the fresh one the host acquires for it.
          if (entry.metadata.reusable === true) throw new LoginPtyError("LOGIN_PTY_UNAVAILABLE", "a login runs only on a fresh single-use lease (this one is kept for reuse)");
          const runner = runnerOf(entry);
          const pty = runner.pty;
          // The login's commands and its open terminal are the lease's work: release drains them and the keepalive sees them.
          return {
            runner: {
              capabilities: runner.capabilities,
              run: (script, io) => registry.track(entry, runner.run(script, io)),
              ...(pty
                ? {
                    pty: {
                      open: async (spec) => {
                        const process = await registry.track(entry, pty.open(spec));
                        void registry.track(entry, process.exited);
                        return process;
                      },
                    },
                  }
                : {}),
            },
            leaseSignal: entry.abort.signal,
          };
        },
        notify: () => ctx?.loginPty,
        log: (message) => info(message),
      })
    : undefined;

  const templateProblems = def.templates ? templateContractProblems(def.templates, def.config.jsonSchema) : [];
  // A declared `ssh` connection without the provider's own: the kit's terminal, over the transport's PTY.
  const kitSshTerminal = def.templates !== undefined && def.templates.connectionTypes.includes("ssh") && !def.templates.connection;
  if (kitSshTerminal && !supportsLoginPty(def.transport)) {
    templateProblems.push('the "ssh" setup connection needs a transport with a pseudo-terminal (transport.pty) or the provider\'s own templates.connection');
  }
  if (templateProblems.length > 0) throw new Error(`${def.driverKey}: ${templateProblems.join("; ")}`);
  // One per worker, listening only while a setup sandbox has a terminal.
  let sshGateway: SshSetupGateway | undefined;
  const gateway = () => (sshGateway ??= createSshSetupGateway({ log: (message) => info(message) }));
  // Built lazily from the hooks below (acquire, destroy), which exist once `hooks` does.
  let templateHooks: ReturnType<typeof createTemplateHooks<H, C>> | undefined;

  /** Release, destroy or stop: the resource is the caller's, its work is drained or ended, then kept or destroyed. */
  const finishLease = async (
    params: PluginEnvironmentReleaseLeaseParams & { resourceDisposition?: Disposition },
    mode: "release" | "destroy" | "stop",
  ): Promise<PluginEnvironmentTerminationReceipt | void> => {
    const id = params.providerLeaseId;
    if (!id) return;
    return guarded(params.config, async (config) => {
      const ref = refOf(params, id, config, params.leaseMetadata);
      const entry = registry.held(id);
      await duplex?.closeLease(id);
      await login?.closeLease(id);
      await sshGateway?.closeLease(id);
      const disposition = params.resourceDisposition;
      const keep = mode === "stop" || disposition === "stop_and_retain" || (mode === "release" && disposition !== "destroy" && def.keep !== undefined && ref.metadata.reusable === true);
      if (entry) {
        const deadline = def.options?.releaseDrainMs ?? DEFAULT_RELEASE_DRAIN_MS;
        if (params.cancelActiveWork === true || (mode === "destroy" && !keep)) await registry.cancel(entry, deadline);
        else await registry.drain(entry, deadline);
      }
      // A lease's command channel (when its runner has one) ends before the sandbox stops or goes.
      await closeCommandChannel(id);
      const handle = entry?.handle ?? (await def.get(ref));
      registry.forget(id);
      if (!handle) return { providerLeaseId: id, state: "destroyed" };
      // Never another provider's, company's or environment's resource, whatever id the call names.
      assertOwned(handle, ref);
      if (keep && !unusable(handle)) {
        // A stop that fails is an error, never a silent delete: the host retries.
        if (!def.keep) throw new Error(`${def.driverKey} cannot keep a sandbox (it declares no keep)`);
        if (keepModeOf(handle, config) === "stop" && handle.state !== "stopped") {
          // What sync left in the sandbox goes before its disk is kept.
          await entry?.sync?.dispose().catch(() => undefined);
          if (!def.stop) throw new Error(`${def.driverKey} keeps a sandbox by stopping it, but declares no stop`);
          await def.stop(handle, ref);
        }
        return { providerLeaseId: id, state: "stopped" };
      }
      await def.destroy(ref, handle);
      return { providerLeaseId: id, state: "destroyed" };
    });
  };

  const hooks = {
    async setup(context: PluginContext) {
      ctx = context;
      // Command channels (starts, breaks, fallbacks) report to the worker's log.
      setCommandChannelLog((message) => info(message));
      await def.setup?.(context);
    },

    async onShutdown() {
      keepers.stopAll();
      await sshGateway?.close();
      await closeAllCommandChannels();
      await def.shutdown?.();
    },

    async onEnvironmentValidateConfig(params: { config: Record<string, unknown> }) {
      const result = def.config.validate(params.config);
      if (!result.ok || !def.validate) return result;
      const extra = def.validate(def.config.parse(params.config), params.config);
      const errors = extra.errors ?? [];
      const warnings = [...(result.warnings ?? []), ...(extra.warnings ?? [])];
      return errors.length > 0 ? { ok: false, errors, warnings } : { ...result, warnings };
    },

    async onEnvironmentProbe(params: Parameters<NonNullable<SandboxProviderDefinition<S, H>["probe"]>>[1]) {
      return guarded(params.config, async (config) => {
        const problems = problemsOf(config);
        if (problems.length > 0) {
          return probeResult(
            `${def.driverKey} sandbox`,
            problems.map((message) => ({ severity: "error" as const, code: "CONFIG_INVALID", message })),
          );
        }
        return def.probe ? def.probe(config, params, { ctx }) : defaultProbe(def, config, params);
      });
    },

    async onEnvironmentAcquireLease(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentAcquireLease"]>>[0]) {
      return guarded(params.config, async (config) => {
        const problems = problemsOf(config);
        if (problems.length > 0) throw new ConfigError(problems);
        await templateHooks?.checkConfiguredTemplate(config, params);
        const plan = planAcquire(def, config, params);
        let entry: LeaseEntry<H, C> | undefined;
        await createWithinBudget(def, config, params, plan, log, async (handle, signal) => {
          entry = entryFor(handle, refOf(params, handle.providerLeaseId, config, {}), undefined);
          const workspace = await makeWorkspace(def.workspace, handle, config, () => runnerOf(entry!), signal);
          entry.workspace = workspace;
          if (!plan.reusable) return;
          if (def.sentinel) await def.sentinel.write(handle, buildSentinel({ fingerprint: plan.fingerprint, providerLeaseId: handle.providerLeaseId }), config);
          else await writeSentinelVia(runnerOf(entry), workspace, plan.fingerprint, handle.providerLeaseId);
        });
        const lease = leaseResult(entry!, entry!.workspace!, plan, params.requestedExpiresAt);
        entry!.metadata = lease.metadata ?? {};
        registry.set(entry!);
        return lease;
      });
    },

    async onEnvironmentResumeLease(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentResumeLease"]>>[0]) {
      return guarded(params.config, async (config) => {
        const gone = { providerLeaseId: null, metadata: { expired: true } };
        const mismatch = { providerLeaseId: null, metadata: { expired: true, identityMismatch: true } };
        const metadata = params.leaseMetadata ?? {};
        const ref = refOf(params, params.providerLeaseId, config, metadata);
        const handle = await def.get(ref);
        if (!handle) return gone;
        if (unusable(handle)) {
          // Past its expiry or failed, but still there (a vendor that stops rather than deletes): ours, so end it.
          if (ownedBy(handle, ref)) await def.destroy(ref, handle).catch((error: unknown) => log(`destroying an ended sandbox failed: ${(error as Error).message}`));
          return gone;
        }
        // Someone else's resource under a recycled id: not ours to touch.
        if (!ownedBy(handle, ref)) return mismatch;
        const shapeFingerprint = shapeFingerprintOf(params.companyId, params.environmentId, def.shape(config));
        const fingerprint = typeof metadata.fingerprint === "string" ? metadata.fingerprint : undefined;
        const reusable = metadata.reusable === true;
        const sameShape = metadata.shapeFingerprint === undefined || metadata.shapeFingerprint === shapeFingerprint;
        const workspace = (sandbox: H) => knownWorkspace(def.workspace, sandbox, config, metadata);
        // A provider that can read the sentinel while the sandbox is stopped checks before starting it.
        const sentinelStillHolds = async (sandbox: H) => {
          if (!reusable) return true;
          if (fingerprint === undefined) return false;
          if (def.sentinel) return sentinelNamesFingerprint(await def.sentinel.read(sandbox, config), fingerprint);
          const dir = workspace(sandbox);
          return dir !== undefined && sentinelHolds(runnerOf({ handle: sandbox, config }), dir, fingerprint);
        };
        let current = handle;
        let matches = sameShape && (def.sentinel ? await sentinelStillHolds(current) : true);
        if (matches && current.state !== undefined && current.state !== "running") {
          if (!def.start) return gone;
          current = await startBounded(def.start, current, ref, params.config);
        }
        if (matches && !def.sentinel) matches = await sentinelStillHolds(current);
        if (!matches) {
          // Ours, but no longer the sandbox this lease was: destroy it, the host provisions a fresh one.
          registry.forget(params.providerLeaseId);
          await def.destroy(ref, current).catch((error: unknown) => log(`destroying a mismatched sandbox failed: ${(error as Error).message}`));
          return mismatch;
        }
        const entry = entryFor(current, ref, workspace(current));
        const dir = await workspaceOf(entry);
        registry.set(entry);
        const lease = leaseResult(entry, dir, { fingerprint: fingerprint ?? "", shapeFingerprint, reusable, grant: metadata.egress as AcquirePlan["grant"] }, null);
        entry.metadata = lease.metadata ?? {};
        return lease;
      });
    },

    onEnvironmentReleaseLease: (params: PluginEnvironmentReleaseLeaseParams) => finishLease(params, "release"),
    onEnvironmentDestroyLease: (params: PluginEnvironmentReleaseLeaseParams) => finishLease(params, "destroy"),
    // Newer hosts (2026.1005.0) stop a lease and keep it; 2026.916.1 never calls this.
    onEnvironmentStopLease: (params: PluginEnvironmentReleaseLeaseParams) => finishLease(params, "stop"),

    async onEnvironmentRealizeWorkspace(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentRealizeWorkspace"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await activeLease(params, params.lease, config);
        return { cwd: await workspaceOf(entry) };
      });
    },

    async onEnvironmentExecute(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentExecute"]>>[0]) {
      return guarded(params.config, async (config) => {
        const first = await activeLease(params, params.lease, config);
        refuseSessionStreamWithoutLiveOutput(def.driverKey, params, runnerOf(first).capabilities);
        return registry.track(
          first,
          retryAfterStart(first, params, async (entry) =>
            executeCommand(runnerOf(entry), execRequestFrom(params, await workspaceOf(entry)), {
              log: (stream, text) => ctx?.execution.log(stream, text),
              defaultTimeoutMs: def.options?.commandTimeoutMs?.(config),
              signal: entry.abort.signal,
              annotateStderr: def.annotateStderr?.(entry.handle, config),
            }),
          ),
        );
      });
    },

    async onEnvironmentSyncIn(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentSyncIn"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await activeLease(params, params.lease, config);
        const roots = syncRootsOf(entry, await workspaceOf(entry));
        return registry.track(entry, syncOf(entry).syncIn(params.operations, { roots, signal: entry.abort.signal, log: info }));
      });
    },

    async onEnvironmentSyncOut(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentSyncOut"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await activeLease(params, params.lease, config);
        const roots = syncRootsOf(entry, await workspaceOf(entry));
        return registry.track(entry, syncOf(entry).syncOut(params.operations, { roots, signal: entry.abort.signal, log: info }));
      });
    },

    ...(duplex
      ? {
          onDuplexChannelOpen: duplex.open,
          onDuplexChannelWrite: duplex.write,
          onDuplexChannelStop: duplex.stop,
          onDuplexChannelClose: duplex.close,
        }
      : {}),
    // Defining the four advertises them; the host also gates on the manifest's supportsLoginPty.
    ...(login
      ? {
          onLoginPtyOpen: login.open,
          onLoginPtyInput: login.input,
          onLoginPtyStop: login.stop,
          onLoginPtyClose: login.close,
        }
      : {}),
  };

  if (def.templates) {
    templateHooks = createTemplateHooks<H, C>({
      driverKey: def.driverKey,
      templates: def.templates,
      guarded,
      refOf,
      handleOf: async (ref) => registry.held(ref.providerLeaseId)?.handle ?? (await def.get(ref)),
      unusable,
      owner,
      running: async (handle, ref) => {
        if (handle.state === undefined || handle.state === "running") return handle;
        if (!def.start) throw new LeaseGoneError(`${def.driverKey} setup sandbox ${handle.providerLeaseId} is ${handle.state}`);
        return startBounded(def.start, handle, ref, ref.config);
      },
      track: (id, work) => {
        const entry = registry.held(id);
        return entry ? registry.track(entry, work) : work;
      },
      acquire: (params) => hooks.onEnvironmentAcquireLease(params),
      destroy: (params) => finishLease(params, "destroy"),
      ...(kitSshTerminal
        ? {
            sshTerminal: {
              connection: (params, ref, input) =>
                gateway().connection(
                  {
                    providerLeaseId: ref.providerLeaseId,
                    // Each shell finds the lease as an execute does (held, or looked up, checked and started).
                    openPty: async (spec) => {
                      const entry = await activeLease(params, { providerLeaseId: ref.providerLeaseId, metadata: ref.metadata }, ref.config);
                      const pty = runnerOf(entry).pty;
                      if (!pty) throw new Error(`${def.driverKey} lease ${ref.providerLeaseId}: its transport has no pseudo-terminal`);
                      // The shell is the lease's work: the keepalive sees it, a cancel ends it.
                      const process = await registry.track(entry, pty.open({ ...spec, signal: entry.abort.signal }));
                      void registry.track(entry, process.exited);
                      return process;
                    },
                  },
                  input,
                ),
              closeLease: async (id) => sshGateway?.closeLease(id),
            },
          }
        : {}),
    });
    // Defining them advertises them; the host also gates on the manifest's custom-image flags.
    const { checkConfiguredTemplate: _check, ...templateMethods } = templateHooks;
    Object.assign(hooks, templateMethods);
  }

  const list = def.list;
  const canKeep = def.keep !== undefined;
  return {
    // definePlugin's type lists only the hooks of its SDK version; onEnvironmentStopLease is for newer hosts.
    plugin: definePlugin(hooks as Parameters<typeof definePlugin>[0]),
    listLeases: defineLeaseLister(async (raw, context) =>
      list ? list(def.config.parse(raw), { ...context.matchLabels, "paperclip-provider": labelValue(def.driverKey) }, { env: context.env, ...(context.signal ? { signal: context.signal } : {}) }) : [],
    ),
    sandboxCapabilities: deriveSandboxCapabilities({ transport: def.transport, keepsLeases: canKeep, concurrentSync: def.options?.concurrentSync ?? true }),
    supportsReusableLeases: canKeep,
    supportsLoginPty: login !== undefined,
    supportsTemplates: templateHooks !== undefined,
  };
}

/**
 * The env var only the host's streamed ACP session command carries (adapter-utils
 * `startAdapterExecutionTargetProcessSessionBridge`, sent when `incrementalSessionOutput` resolved
 * true): its frames must arrive while it runs.
 */
const SESSION_STREAM_ENV = "PAPERCLIP_PROCESS_SESSION_COMMAND_B64";

/**
 * The declared transport is the provider's best; a lease's runner may be weaker (e.g. a vendor
 * endpoint without streams). A streamed session command on a runner whose output arrives only at
 * the end would hang the agent's run until its timeout, so it is refused at once, clearly.
 */
function refuseSessionStreamWithoutLiveOutput(
  driverKey: string,
  params: { env?: Record<string, string> | null; lease: { providerLeaseId?: string | null } },
  capabilities: TransportCapabilities,
): void {
  if (capabilities.liveOutput || params.env?.[SESSION_STREAM_ENV] === undefined) return;
  throw new Error(
    `${driverKey} lease ${params.lease.providerLeaseId}: its transport delivers a command's output only when it ends, so it cannot stream an agent session (incremental session output needs live output)`,
  );
}
