// A plugin's hooks driven in-process as the real host drives them (HOST-CALLS.md): one host
// identity (company, environment, agent, workspace) and config, every call carrying what the host
// sends. Conformance forks the built worker; provider tests that look behind the provider's back
// (a vendor client, an injected clock, a second worker after a restart) use this instead.
import { randomUUID } from "node:crypto";
import type {
  PaperclipPlugin,
  PluginContext,
  PluginDefinition,
  PluginEnvironmentExecuteResult,
  PluginEnvironmentLease,
  PluginEnvironmentProbeResult,
  PluginEnvironmentTerminationReceipt,
  PluginEnvironmentValidationResult,
} from "@paperclipai/plugin-sdk";

type Hooks = Required<PluginDefinition>;
type Extra = Record<string, unknown>;

export interface HostForOptions {
  driverKey: string;
  /** Ids the host's calls carry; unique per host by default, so hosts never see each other's leases. */
  identity?: Partial<HostIdentity>;
}

export interface HostIdentity {
  companyId: string;
  environmentId: string;
  agentId: string;
  executionWorkspaceId: string;
}

export interface InProcessHost {
  readonly plugin: PaperclipPlugin;
  readonly config: Record<string, unknown>;
  readonly identity: HostIdentity;
  /** What the plugin logged through `ctx.logger.warn` and `ctx.logger.error`. */
  readonly warnings: string[];
  /** Live output the plugin streamed through `ctx.execution.log`, as [stream, chunk]. */
  readonly executionLog: Array<[string, string]>;
  /** The plugin's hooks, set up, for calls this host does not wrap. */
  hooks(): Promise<Hooks>;
  validate(config?: Extra): Promise<PluginEnvironmentValidationResult>;
  probe(config?: Extra): Promise<PluginEnvironmentProbeResult>;
  /** A run's lease: a fresh `runId` each time, plus agent and workspace (a kept lease needs both). */
  acquire(extra?: Extra): Promise<PluginEnvironmentLease>;
  resume(lease: PluginEnvironmentLease, extra?: Extra): Promise<PluginEnvironmentLease>;
  execute(lease: PluginEnvironmentLease, command: string, args?: string[], extra?: Extra): Promise<PluginEnvironmentExecuteResult>;
  /** `sh -c script` in the lease's working directory. */
  sh(lease: PluginEnvironmentLease, script: string, extra?: Extra): Promise<PluginEnvironmentExecuteResult>;
  release(lease: PluginEnvironmentLease, extra?: Extra): Promise<PluginEnvironmentTerminationReceipt | void>;
  destroy(lease: PluginEnvironmentLease, extra?: Extra): Promise<PluginEnvironmentTerminationReceipt | void>;
  /** The same identity and config on another worker (the host after a restart, or a second worker). */
  withPlugin(plugin: PaperclipPlugin): InProcessHost;
  /** The same plugin and identity with more config (the operator edited the environment). */
  withConfig(config: Extra): InProcessHost;
  /** The plugin's `onShutdown`, as the host calls it before ending a worker. */
  shutdown(): Promise<void>;
}

const setUp = new WeakMap<PluginDefinition, Promise<void>>();

/** Keys the host strips from the config it sends after acquire (its own lease and envelope fields). */
const HOST_INTERNAL_KEYS = ["driver", "executionWorkspaceMode", "pluginId", "pluginKey", "providerMetadata", "remoteCwd", "shellCommand"];

/**
 * The config of every call after acquire, as the host sends it (HOST-CALLS.md §1): the environment's
 * config merged with the lease's metadata, host-internal keys stripped. A provider must parse it
 * leniently.
 */
export function configAfterAcquire(config: Record<string, unknown>, metadata: Record<string, unknown> | null | undefined): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...config, ...(metadata ?? {}) };
  for (const key of HOST_INTERNAL_KEYS) delete merged[key];
  return merged;
}

interface Captured {
  warnings: string[];
  executionLog: Array<[string, string]>;
}

function contextFor(captured: Captured): PluginContext {
  const quiet = () => undefined;
  const keep = (message: unknown) => void captured.warnings.push(String(message));
  const log = (stream: string, chunk: string) => void captured.executionLog.push([stream, chunk]);
  return { logger: { warn: keep, error: keep, info: quiet, debug: quiet }, execution: { log } } as unknown as PluginContext;
}

export function hostFor(plugin: PaperclipPlugin, config: Record<string, unknown>, options: HostForOptions): InProcessHost {
  const suffix = randomUUID().slice(0, 8);
  const identity: HostIdentity = {
    companyId: `company-${suffix}`,
    environmentId: `environment-${suffix}`,
    agentId: `agent-${suffix}`,
    executionWorkspaceId: `ws-${suffix}`,
    ...options.identity,
  };
  return build(plugin, config, options.driverKey, identity, { warnings: [], executionLog: [] });
}

function build(plugin: PaperclipPlugin, config: Record<string, unknown>, driverKey: string, identity: HostIdentity, captured: Captured): InProcessHost {
  const definition = plugin.definition;
  const hooks = async (): Promise<Hooks> => {
    let ready = setUp.get(definition);
    if (!ready) {
      ready = definition.setup(contextFor(captured));
      setUp.set(definition, ready);
    }
    await ready;
    return definition as Hooks;
  };
  const scope = { driverKey, companyId: identity.companyId, environmentId: identity.environmentId, config };
  const onLease = (lease: PluginEnvironmentLease) => ({ ...scope, config: configAfterAcquire(config, lease.metadata) });
  const leaseRef = (lease: PluginEnvironmentLease, extra: Extra) => ({ ...onLease(lease), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata, ...extra });
  const execute = async (lease: PluginEnvironmentLease, command: string, args: string[] = [], extra: Extra = {}) =>
    (await hooks()).onEnvironmentExecute({
      ...onLease(lease),
      lease: { providerLeaseId: lease.providerLeaseId, metadata: lease.metadata },
      command,
      args,
      cwd: lease.metadata?.remoteCwd as string | undefined,
      ...extra,
    } as Parameters<Hooks["onEnvironmentExecute"]>[0]);
  return {
    plugin,
    config,
    identity,
    warnings: captured.warnings,
    executionLog: captured.executionLog,
    hooks,
    validate: async (more = {}) => (await hooks()).onEnvironmentValidateConfig({ driverKey, config: { ...config, ...more } } as Parameters<Hooks["onEnvironmentValidateConfig"]>[0]),
    probe: async (more = {}) => (await hooks()).onEnvironmentProbe({ ...scope, config: { ...config, ...more } } as Parameters<Hooks["onEnvironmentProbe"]>[0]),
    acquire: async (extra = {}) =>
      (await hooks()).onEnvironmentAcquireLease({ ...scope, runId: `run-${randomUUID()}`, agentId: identity.agentId, executionWorkspaceId: identity.executionWorkspaceId, ...extra } as Parameters<
        Hooks["onEnvironmentAcquireLease"]
      >[0]),
    resume: async (lease, extra = {}) =>
      (await hooks()).onEnvironmentResumeLease({ ...leaseRef(lease, extra), providerLeaseId: lease.providerLeaseId! } as Parameters<Hooks["onEnvironmentResumeLease"]>[0]),
    execute,
    sh: (lease, script, extra) => execute(lease, "sh", ["-c", script], extra),
    release: async (lease, extra = {}) => (await hooks()).onEnvironmentReleaseLease(leaseRef(lease, extra) as Parameters<Hooks["onEnvironmentReleaseLease"]>[0]),
    destroy: async (lease, extra = {}) => (await hooks()).onEnvironmentDestroyLease(leaseRef(lease, extra) as Parameters<Hooks["onEnvironmentDestroyLease"]>[0]),
    withPlugin: (other) => build(other, config, driverKey, identity, captured),
    withConfig: (more) => build(plugin, { ...config, ...more }, driverKey, identity, captured),
    shutdown: async () => {
      if (setUp.has(definition)) await definition.onShutdown?.();
    },
  };
}
