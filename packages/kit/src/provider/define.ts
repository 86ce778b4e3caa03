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
import { secretFieldPaths } from "../config/secret-paths.js";
import { createDuplexChannels } from "../duplex/duplex-channels.js";
import { executeCommand } from "../exec/execute.js";
import { closeAllCommandChannels, closeCommandChannel } from "../transports/command-channel/index.js";
import { labelValue } from "../lease/labels.js";
import { execRequestFrom } from "../plugin/exec-request.js";
import { downloadStagesCleanupScript } from "../sync/file-api-sync.js";
import { syncFor } from "../sync/sync-for.js";
import type { Redactor } from "../redact/redactor.js";
import { createWithinBudget, destroyConfirmed, planAcquire, shapeFingerprintOf, type AcquirePlan } from "./acquire.js";
import { deriveSandboxCapabilities, supportsDuplex, type DerivedSandboxCapabilities } from "./capabilities.js";
import { LeaseGoneError, redactedError, redactorFor, secretValuesOf } from "./errors.js";
import { LeaseRegistry, type LeaseEntry } from "./lease-registry.js";
import { defaultProbe } from "./probe.js";
import { buildSentinel, sentinelMatches as holdsFingerprint } from "../lease/sentinel.js";
import { sentinelHolds, writeSentinelVia } from "./sentinel-io.js";
import type { LeaseRef, SandboxHandle, SandboxProviderDefinition } from "./types.js";

const DEFAULT_RELEASE_DRAIN_MS = 30_000;

export interface SandboxProvider {
  /** The Paperclip plugin: `export default provider.plugin` from `plugin.ts`, `runWorker` it from `worker.ts`. */
  plugin: PaperclipPlugin;
  /** For the manifest's driver declaration. */
  sandboxCapabilities: DerivedSandboxCapabilities;
  supportsReusableLeases: boolean;
}

/** Release dispositions of newer hosts (2026.1005.0); absent on 2026.916.1. */
type Disposition = "keep_running" | "stop_and_retain" | "destroy";

/**
 * Writes every environment hook of a sandbox-provider plugin from a declaration: validation, probe,
 * acquire (labels, fingerprint, expiry, budget, clean-up of half-made sandboxes), resume (expired
 * and identity-mismatch shapes, sentinel check, restart of a stopped sandbox), release and destroy
 * (drain or cancel, receipts only after the provider confirms), realize, execute, sync (strategy by
 * transport), and duplex channels (only over a transport that can carry them).
 */
export function defineSandboxProvider<S extends z.ZodObject, H extends SandboxHandle>(def: SandboxProviderDefinition<S, H>): SandboxProvider {
  type C = z.output<S>;
  const registry = new LeaseRegistry<H, C>();
  const secretPaths = secretFieldPaths(def.config.jsonSchema);
  let ctx: PluginContext | undefined;
  const log = (message: string) => ctx?.logger?.warn(message);
  const info = (message: string) => ctx?.logger?.info(message);
  const canStop = def.stop !== undefined;
  const duplexOk = supportsDuplex(def.transport);

  const parse = (raw: unknown): { config: C; redact: Redactor } => {
    const config = def.config.parse(raw);
    return { config, redact: redactorFor(secretValuesOf(config, secretPaths)) };
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

  const refOf = (params: PluginEnvironmentDriverBaseParams, providerLeaseId: string, config: C, metadata: Record<string, unknown> | undefined): LeaseRef<C> => ({
    providerLeaseId,
    config,
    metadata: metadata ?? {},
    companyId: params.companyId,
    environmentId: params.environmentId,
  });

  const entryFor = (handle: H, ref: LeaseRef<C>): LeaseEntry<H, C> => ({
    providerLeaseId: handle.providerLeaseId,
    handle,
    config: ref.config,
    metadata: ref.metadata,
    files: def.files?.(handle, ref.config),
    work: new Set(),
    abort: new AbortController(),
    downloadStages: false,
  });

  // Made per use from the latest config (cheap: providers keep their clients on the handle).
  const runnerOf = (entry: LeaseEntry<H, C>) => def.runner(entry.handle, entry.config);

  const expired = (handle: H) => handle.expiresAt instanceof Date && handle.expiresAt.getTime() <= Date.now();

  /** The live lease for a hook that needs one: held, or looked up (and started when stopped). */
  const live = async (params: PluginEnvironmentDriverBaseParams, lease: PluginEnvironmentLease, config: C): Promise<LeaseEntry<H, C>> => {
    const id = lease.providerLeaseId;
    if (!id) throw new LeaseGoneError("this lease has no providerLeaseId (it was never acquired, or it expired)");
    const held = registry.held(id);
    if (held && (def.alive ? def.alive(held.handle) : true) && !expired(held.handle)) {
      held.config = config;
      return held;
    }
    if (held) registry.forget(id);
    return registry.obtain(id, async () => {
      const ref = refOf(params, id, config, lease.metadata);
      let handle = await def.get(ref);
      if (!handle || expired(handle)) throw new LeaseGoneError(`${def.driverKey} lease ${id} is not running (released, destroyed or expired)`);
      if (handle.state !== undefined && handle.state !== "running") {
        if (!def.start) throw new LeaseGoneError(`${def.driverKey} lease ${id} is ${handle.state}`);
        handle = await def.start(handle, ref);
      }
      return entryFor(handle, ref);
    });
  };

  /** Runs `work` once; if the provider says the sandbox was not running, starts it and runs it again. */
  const withRestart = async <T>(entry: LeaseEntry<H, C>, params: PluginEnvironmentDriverBaseParams, work: (entry: LeaseEntry<H, C>) => Promise<T>): Promise<T> => {
    try {
      return await work(entry);
    } catch (error) {
      if (!def.notRunning?.(error) || !def.start || entry.abort.signal.aborted) throw error;
      const ref = refOf(params, entry.providerLeaseId, entry.config, entry.metadata);
      const started = entryFor(await def.start(entry.handle, ref), ref);
      registry.set(started);
      return work(started);
    }
  };

  const leaseResult = (handle: H, config: C, plan: Pick<AcquirePlan, "fingerprint" | "shapeFingerprint" | "reusable" | "grant">, requested: string | null | undefined): PluginEnvironmentLease => {
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
        ...(def.leaseMetadata?.(handle, config) ?? {}),
        remoteCwd: def.workspaceDir(handle, config),
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
          return { runner: runnerOf(entry), leaseSignal: entry.abort.signal };
        },
        notify: () => ctx?.duplexChannel,
        log: (message) => log(message),
      })
    : undefined;

  const end = async (params: PluginEnvironmentReleaseLeaseParams & { resourceDisposition?: Disposition }, mode: "release" | "destroy" | "stop"): Promise<PluginEnvironmentTerminationReceipt | void> => {
    const id = params.providerLeaseId;
    if (!id) return;
    return guarded(params.config, async (config) => {
      const ref = refOf(params, id, config, params.leaseMetadata);
      const entry = registry.held(id);
      await duplex?.closeLease(id);
      const disposition = params.resourceDisposition;
      const keep =
        mode === "stop" ||
        disposition === "stop_and_retain" ||
        (mode === "release" && disposition !== "destroy" && canStop && ref.metadata.reusable === true);
      if (entry) {
        const deadline = def.releaseDrainMs ?? DEFAULT_RELEASE_DRAIN_MS;
        if (params.cancelActiveWork === true || (mode === "destroy" && !keep)) await registry.cancel(entry, deadline);
        else await registry.drain(entry, deadline);
      }
      // A lease's command channel (when its runner has one) ends before the sandbox stops or goes.
      await closeCommandChannel(id);
      if (keep) {
        // A stop that fails is an error, never a silent delete: the host retries.
        if (!def.stop) throw new Error(`${def.driverKey} cannot keep a sandbox (it has no stop)`);
        const handle = entry?.handle ?? (await def.get(ref));
        registry.forget(id);
        if (!handle || expired(handle)) {
          if (handle) await def.destroy(ref, handle);
          return { providerLeaseId: id, state: "destroyed" };
        }
        if (entry?.downloadStages) await runnerOf(entry).run(downloadStagesCleanupScript(), {}).catch(() => undefined);
        await def.stop(handle, ref);
        return { providerLeaseId: id, state: "stopped" };
      }
      registry.forget(id);
      await def.destroy(ref, entry?.handle);
      return { providerLeaseId: id, state: "destroyed" };
    });
  };

  const hooks = {
    async setup(context: PluginContext) {
      ctx = context;
      await def.setup?.(context);
    },

    async onShutdown() {
      await closeAllCommandChannels();
      await def.shutdown?.();
    },

    async onEnvironmentValidateConfig(params: { config: Record<string, unknown> }) {
      const result = def.config.validate(params.config);
      if (!result.ok || !def.validate) return result;
      const extra = def.validate(def.config.parse(params.config));
      const errors = extra.errors ?? [];
      const warnings = [...(result.warnings ?? []), ...(extra.warnings ?? [])];
      return errors.length > 0 ? { ok: false, errors, warnings } : { ...result, warnings };
    },

    async onEnvironmentProbe(params: Parameters<NonNullable<SandboxProviderDefinition<S, H>["probe"]>>[1]) {
      return guarded(params.config, (config) => (def.probe ? def.probe(config, params, { ctx }) : defaultProbe(def, config, params)));
    },

    async onEnvironmentAcquireLease(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentAcquireLease"]>>[0]) {
      return guarded(params.config, async (config) => {
        const plan = planAcquire(def, config, params);
        const handle = await createWithinBudget(def, config, params, plan, log);
        const ref = refOf(params, handle.providerLeaseId, config, {});
        const entry = entryFor(handle, ref);
        try {
          if (plan.reusable) {
            if (def.sentinel) await def.sentinel.write(handle, buildSentinel({ fingerprint: plan.fingerprint, providerLeaseId: handle.providerLeaseId }), config);
            else await writeSentinelVia(runnerOf(entry), def.workspaceDir(handle, config), plan.fingerprint, handle.providerLeaseId);
          }
        } catch (error) {
          await destroyConfirmed(def, ref, handle, plan);
          throw error;
        }
        const lease = leaseResult(handle, config, plan, params.requestedExpiresAt);
        entry.metadata = lease.metadata ?? {};
        registry.set(entry);
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
        if (expired(handle)) {
          // Past its expiry but still there (a vendor that stops rather than deletes): ours, so end it.
          if (ownedBy(handle, params)) await def.destroy(ref, handle).catch((error: unknown) => log(`destroying an expired sandbox failed: ${(error as Error).message}`));
          return gone;
        }
        // Someone else's resource under a recycled id: not ours to touch.
        if (!ownedBy(handle, params)) return mismatch;
        const shapeFingerprint = shapeFingerprintOf(params.companyId, params.environmentId, def.shape(config));
        const fingerprint = typeof metadata.fingerprint === "string" ? metadata.fingerprint : undefined;
        const reusable = metadata.reusable === true;
        const sameShape = metadata.shapeFingerprint === undefined || metadata.shapeFingerprint === shapeFingerprint;
        // A provider that can read the sentinel while the sandbox is stopped checks before starting it.
        const sentinelMatches = async (sandbox: H) => {
          if (!reusable) return true;
          if (fingerprint === undefined) return false;
          if (def.sentinel) return holdsFingerprint(await def.sentinel.read(sandbox, config), fingerprint);
          return sentinelHolds(runnerOf(entryFor(sandbox, ref)), def.workspaceDir(sandbox, config), fingerprint);
        };
        let current = handle;
        let matches = sameShape && (def.sentinel ? await sentinelMatches(current) : true);
        if (matches && current.state !== undefined && current.state !== "running") {
          if (!def.start) return gone;
          current = await def.start(current, ref);
        }
        if (matches && !def.sentinel) matches = await sentinelMatches(current);
        if (!matches) {
          // Ours, but no longer the sandbox this lease was: destroy it, the host provisions a fresh one.
          registry.forget(params.providerLeaseId);
          await def.destroy(ref, current).catch((error: unknown) => log(`destroying a mismatched sandbox failed: ${(error as Error).message}`));
          return mismatch;
        }
        const entry = entryFor(current, ref);
        registry.set(entry);
        const lease = leaseResult(current, config, { fingerprint: fingerprint ?? "", shapeFingerprint, reusable, grant: metadata.egress as AcquirePlan["grant"] }, null);
        entry.metadata = lease.metadata ?? {};
        return lease;
      });
    },

    onEnvironmentReleaseLease: (params: PluginEnvironmentReleaseLeaseParams) => end(params, "release"),
    onEnvironmentDestroyLease: (params: PluginEnvironmentReleaseLeaseParams) => end(params, "destroy"),
    // Newer hosts (2026.1005.0) stop a lease and keep it; 2026.916.1 never calls this.
    onEnvironmentStopLease: (params: PluginEnvironmentReleaseLeaseParams) => end(params, "stop"),

    async onEnvironmentRealizeWorkspace(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentRealizeWorkspace"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await live(params, params.lease, config);
        return { cwd: def.workspaceDir(entry.handle, config) };
      });
    },

    async onEnvironmentExecute(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentExecute"]>>[0]) {
      return guarded(params.config, async (config) => {
        const first = await live(params, params.lease, config);
        return registry.track(
          first,
          withRestart(first, params, (entry) =>
            executeCommand(runnerOf(entry), execRequestFrom(params, def.workspaceDir(entry.handle, config)), {
              log: (stream, text) => ctx?.execution.log(stream, text),
              defaultTimeoutMs: def.defaultTimeoutMs?.(config) ?? numberOr((config as { timeoutMs?: unknown }).timeoutMs),
              signal: entry.abort.signal,
              annotateStderr: def.annotateStderr?.(entry.handle, config),
            }),
          ),
        );
      });
    },

    async onEnvironmentSyncIn(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentSyncIn"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await live(params, params.lease, config);
        const roots = def.syncRoots?.(entry.handle, config) ?? [def.workspaceDir(entry.handle, config)];
        return registry.track(entry, syncFor(runnerOf(entry), entry.files, def.syncPrefer ? { prefer: def.syncPrefer } : {}).syncIn(params.operations, { roots, signal: entry.abort.signal, log: info }));
      });
    },

    async onEnvironmentSyncOut(params: Parameters<NonNullable<PaperclipPlugin["definition"]["onEnvironmentSyncOut"]>>[0]) {
      return guarded(params.config, async (config) => {
        const entry = await live(params, params.lease, config);
        const roots = def.syncRoots?.(entry.handle, config) ?? [def.workspaceDir(entry.handle, config)];
        const strategy = syncFor(runnerOf(entry), entry.files, def.syncPrefer ? { prefer: def.syncPrefer } : {});
        if (strategy.kind === "file-api") entry.downloadStages = true;
        return registry.track(entry, strategy.syncOut(params.operations, { roots, signal: entry.abort.signal, log: info }));
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
  };

  return {
    // definePlugin's type lists only the hooks of its SDK version; onEnvironmentStopLease is for newer hosts.
    plugin: definePlugin(hooks as Parameters<typeof definePlugin>[0]),
    sandboxCapabilities: deriveSandboxCapabilities({ transport: def.transport, canStop, concurrentSync: def.concurrentSync ?? true }),
    supportsReusableLeases: canStop,
  };
}

/** A handle whose vendor labels name another company or environment is someone else's. */
function ownedBy(handle: SandboxHandle, params: PluginEnvironmentDriverBaseParams): boolean {
  const owner = handle.labels;
  if (!owner) return true;
  const company = owner["paperclip-company"];
  const environment = owner["paperclip-environment"];
  return (company === undefined || company === labelValue(params.companyId)) && (environment === undefined || environment === labelValue(params.environmentId));
}

function numberOr(value: unknown): number | undefined {
  return typeof value === "number" && value > 0 ? value : undefined;
}
