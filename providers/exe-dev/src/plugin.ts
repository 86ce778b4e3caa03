import { rm } from "node:fs/promises";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import {
  createIdempotently,
  defaultProbe,
  type SandboxProviderDefinition,
  defineSandboxProvider,
  withCommandChannel,
  withInlineEnv,
  type SandboxHandle,
  type SshDestination,
} from "@paperclip-sandbox/kit";
import { copyOwnVm, createExeDevApi, newOwnVm, waitUntilUnlisted, withTags, type ExeDevApi, type VmRecord } from "./api.js";
import { apiKeyOf, configProblems, envOf, exeDevConfig, type exeDevConfigSchema, normalizeApiUrl, sshIdentityOf, type ExeDevConfig } from "./config.js";
import { EXE_DEV_DRIVER_KEY, EXE_DEV_SHAPE } from "./manifest.js";
import { exeDevTemplates } from "./templates.js";
import { isVmName, labelsOf, tagOf, tagsOf, vmNameFor } from "./vm-names.js";
import { connectWhenUp, destinationOf, environmentDir, openVmSession, recordedHostKeys, runtimeBase, sweepStaleSessions } from "./vm-ssh.js";
import type { OpenSshSession } from "@paperclip-sandbox/kit";

export interface ExeDevHandle extends SandboxHandle {
  vm: VmRecord;
  destination: SshDestination;
  /** The VM's host-key lines as first recorded (lease metadata; restored in a fresh worker). */
  hostKeys: string[];
  /** The lease's company and environment as the host names them (the host-key directory is theirs). */
  owner: { companyId: string; environmentId: string };
}

export interface ExeDevPluginDeps {
  /** Where the EXE_API_KEY fallback is read (default the worker's environment). */
  env?: NodeJS.ProcessEnv;
  /** The API client for a config (default: one per endpoint and token); `env` when listing outside the worker. */
  apiFor?: (config: ExeDevConfig, env?: NodeJS.ProcessEnv) => ExeDevApi;
  /** Parent of the worker's SSH state directory (default the OS temp dir). */
  runtimeParent?: string;
  /** A connection no command used for this long is closed (default 5 minutes). */
  idleCloseMs?: number;
}

interface Connection {
  session: OpenSshSession;
  knownHostsFile: string;
}

/** A connection no command used for this long is closed (a kept lease's included); the next command opens one. */
const IDLE_CLOSE_MS = 5 * 60_000;

export function createExeDevProvider(deps: ExeDevPluginDeps = {}) {
  let ctx: PluginContext | undefined;
  const clients = new Map<string, ExeDevApi>();
  const apiFor =
    deps.apiFor ??
    ((config: ExeDevConfig, env?: NodeJS.ProcessEnv) => {
      const apiKey = apiKeyOf(config, env ?? deps.env);
      if (!apiKey) throw new Error(`exe.dev: no API token: set API token, or EXE_API_KEY in the plugin worker's environment`);
      const apiUrl = normalizeApiUrl(config.apiUrl);
      const key = `${apiUrl}\0${apiKey}`;
      let client = clients.get(key);
      if (!client) {
        client = createExeDevApi({ apiUrl, apiKey, onRetry: (message) => ctx?.logger.warn(message) });
        clients.set(key, client);
      }
      return client;
    });

  /** One SSH connection per VM this worker serves, opened on first use. */
  const connections = new Map<string, Promise<Connection>>();
  /** When each connection was last used, and how many commands run on it now (never idle while one does). */
  const lastUse = new Map<string, number>();
  const active = new Map<string, number>();
  let idleSweep: NodeJS.Timeout | undefined;
  const base = () => runtimeBase(deps.runtimeParent);

  const identityOf = (config: ExeDevConfig) => {
    const checked = sshIdentityOf(config);
    if (!checked.ok) throw new Error(checked.problem);
    if ("repaired" in checked.identity) for (const repair of checked.identity.repaired) ctx?.logger.warn(`exe.dev SSH private key: ${repair}`);
    return checked.identity;
  };

  const connectionFor = (handle: ExeDevHandle, config: ExeDevConfig): Promise<Connection> => {
    lastUse.set(handle.providerLeaseId, Date.now());
    let connection = connections.get(handle.providerLeaseId);
    if (!connection) {
      connection = (async () => {
        const root = await base();
        return openVmSession({
          vmName: handle.providerLeaseId,
          destination: handle.destination,
          identity: identityOf(config),
          config,
          base: root,
          envDir: await environmentDir(root, handle.owner.companyId, handle.owner.environmentId),
          fresh: false,
          seed: handle.hostKeys,
        });
      })();
      connections.set(handle.providerLeaseId, connection);
      connection.catch(() => connections.delete(handle.providerLeaseId));
    }
    return connection;
  };

  const closeConnection = async (vmName: string) => {
    const connection = connections.get(vmName);
    connections.delete(vmName);
    lastUse.delete(vmName);
    await (await connection?.catch(() => undefined))?.session.close();
  };

  const definition: SandboxProviderDefinition<typeof exeDevConfigSchema, ExeDevHandle> = {
    driverKey: EXE_DEV_DRIVER_KEY,
    config: exeDevConfig,
    transport: EXE_DEV_SHAPE.transport,
    // Under the VM user's home, as upstream's provider puts it (the kit makes it and reads its real path back).
    workspace: { homeSubdir: "paperclip-workspace" },
    // A change of any of these means another VM.
    shape: (config) => ({
      image: config.image,
      templateRef: config.templateRef,
      cpu: config.cpu,
      memory: config.memory,
      disk: config.disk,
      setupScript: config.setupScript,
      env: config.env,
      tags: config.tags,
    }),
    options: { commandTimeoutMs: (config) => config.timeoutMs },
    // exe.dev has no stop: a kept lease keeps its VM running (this worker's connection closes when idle).
    keep: { reusable: (config) => config.reuseLease, by: "leave-running" },
    validate: (config) => configProblems(config, deps.env),
    // A template is a VM copied from the setup VM; runs start as copies of it (templates.ts).
    templates: exeDevTemplates((config) => apiFor(config)),
    setup: async (context) => {
      ctx = context;
      // A directory that is not ours fails the lease that needs it (with the reason), not the worker.
      await base()
        .then((root) => sweepStaleSessions(root))
        .catch((error: Error) => ctx?.logger.warn(`exe.dev: ${error.message}`));
      const idleMs = deps.idleCloseMs ?? IDLE_CLOSE_MS;
      idleSweep = setInterval(
        () => {
          const now = Date.now();
          for (const [name, at] of lastUse) if (!active.get(name) && now - at > idleMs) void closeConnection(name).catch(() => undefined);
        },
        Math.min(60_000, Math.max(50, idleMs / 4)),
      );
      idleSweep.unref();
    },
    shutdown: async () => {
      if (idleSweep) clearInterval(idleSweep);
      await Promise.allSettled([...connections.keys()].map((name) => closeConnection(name)));
    },

    async create({ config, params, labels, signal, created }) {
      const identity = identityOf(config);
      const api = apiFor(config);
      const tags = [...tagsOf(labels), ...config.tags.filter((tag) => !tag.startsWith("paperclip-"))];
      const nameOf = (nonce: string) => vmNameFor(config.namePrefix, params.environmentId, nonce);
      const size = { cpu: config.cpu, memory: config.memory, disk: config.disk };
      const template = config.templateRef;
      const vm = await createIdempotently({
        create: (nonce) =>
          template
            ? // A copy of the template (checked by the kit to be this company's and environment's): its disk, this config's size.
              copyOwnVm(api, { source: template, name: nameOf(nonce), ...size }, signal)
            : newOwnVm(api, { name: nameOf(nonce), tags, image: config.image, ...size, env: envOf(config), setupScript: config.setupScript }, signal),
        find: (nonce) => api.find(nameOf(nonce), signal),
        signal,
      }).then(async (made) => {
        created(made.name);
        // cp takes no tags: the lease's labels are added to the copy (a VM `new` made has them already).
        return withTags(api, made, tags, signal);
      });
      const destination = destinationOf(vm, config);
      const root = await base();
      const connection = openVmSession({
        vmName: vm.name,
        destination,
        identity,
        config,
        base: root,
        envDir: await environmentDir(root, params.companyId, params.environmentId),
        fresh: true,
      });
      connections.set(vm.name, connection);
      const { session, knownHostsFile } = await connection;
      lastUse.set(vm.name, Date.now());
      // A new VM's sshd may still be starting; its key is recorded on this first connection.
      await connectWhenUp(session, signal);
      return {
        providerLeaseId: vm.name,
        vm,
        destination,
        hostKeys: await recordedHostKeys(knownHostsFile, destination),
        labels: labelsOf(vm.tags),
        owner: { companyId: params.companyId, environmentId: params.environmentId },
        state: "running",
        expiresAt: null,
      } satisfies ExeDevHandle;
    },

    async get(ref) {
      if (!isVmName(ref.providerLeaseId)) return null;
      const vm = await apiFor(ref.config).find(ref.providerLeaseId);
      if (!vm) return null;
      const metadata = ref.metadata;
      return {
        providerLeaseId: vm.name,
        vm,
        destination: destinationOf(vm, ref.config, numberOr(metadata.vmSshPort)),
        hostKeys: Array.isArray(metadata.vmHostKeys) ? metadata.vmHostKeys.filter((line): line is string => typeof line === "string") : [],
        labels: labelsOf(vm.tags),
        owner: { companyId: ref.companyId, environmentId: ref.environmentId },
        state: vm.status === "running" || vm.status === undefined ? "running" : "ended",
        expiresAt: null,
      } satisfies ExeDevHandle;
    },

    async destroy(ref, handle) {
      await closeConnection(handle.providerLeaseId);
      const api = apiFor(ref.config);
      await api.remove(handle.providerLeaseId);
      // The receipt only once exe.dev no longer lists it.
      await waitUntilUnlisted(api, handle.providerLeaseId);
      const root = await base();
      await rm(`${await environmentDir(root, ref.companyId, ref.environmentId)}/${handle.providerLeaseId}.known_hosts`, { force: true });
    },

    runner(handle, config) {
      const name = handle.providerLeaseId;
      // A command or an open terminal keeps the connection from being closed as idle.
      const using = <T>(work: () => Promise<T>): Promise<T> => {
        active.set(name, (active.get(name) ?? 0) + 1);
        return work().finally(() => {
          active.set(name, (active.get(name) ?? 1) - 1);
          lastUse.set(name, Date.now());
        });
      };
      // The session's runner ends a command's remote process group itself on abort (a second channel);
      // its terminals are `ssh -tt` channels on the same connection. Commands go over the kit's
      // command channel once it is up (one long-lived SSH channel: no channel open per command); a
      // signalled command reports 128 + n there too, as the fresh channel's shell reports it.
      const channel = withCommandChannel(
        { capabilities: EXE_DEV_SHAPE.transport, run: (script, io) => using(async () => (await connectionFor(handle, config)).session.runner.run(script, io)) },
        { lease: name, signalsAsExitStatus: true },
      );
      return withInlineEnv({
        capabilities: channel.capabilities,
        run: (script, io) => channel.run(script, io),
        pty: {
          open: async (spec) => {
            const terminal = await using(async () => (await connectionFor(handle, config)).session.pty.open(spec));
            void using(() => terminal.exited);
            return terminal;
          },
        },
      });
    },

    leaseMetadata: (handle) => ({
      vmName: handle.providerLeaseId,
      vmSshHost: handle.destination.host,
      vmSshPort: handle.destination.port,
      ...(handle.destination.user ? { vmSshUser: handle.destination.user } : {}),
      vmHostKeys: handle.hostKeys,
      ...(handle.vm.httpsUrl ? { httpsUrl: handle.vm.httpsUrl } : {}),
    }),

    async list(config, labels, { env, signal }) {
      const filter = labels["paperclip-environment"] ? tagOf("paperclip-environment", labels["paperclip-environment"]) : tagOf("paperclip-provider", EXE_DEV_DRIVER_KEY);
      return (await apiFor(config, env).list(filter, signal))
        .map((vm) => ({ vm, labels: labelsOf(vm.tags) }))
        .filter(({ labels: have }) => Object.entries(labels).every(([key, value]) => have[key] === value))
        .map(({ vm, labels: have }) => ({ providerLeaseId: vm.name, labels: have, state: vm.status }));
    },
  };
  // The kit's probe (create, one command, delete), its summary carrying the config's warnings: the
  // host's form shows no validation warning, only this summary (a repaired key is named there).
  definition.probe = async (config, params) => {
    const result = await defaultProbe(definition, config, params);
    const warnings = configProblems(config, deps.env).warnings;
    return result.ok && warnings.length > 0 ? { ...result, summary: `${result.summary} — ${warnings.join("; ")}` } : result;
  };
  return defineSandboxProvider(definition);
}

export const createExeDevPlugin = (deps: ExeDevPluginDeps = {}) => createExeDevProvider(deps).plugin;

const provider = createExeDevProvider();
/** For `paperclip-sandbox leases gc --provider exe-dev`: this provider's VMs, found at exe.dev by their tags. */
export const listLeases = provider.listLeases;
export default provider.plugin;

function numberOr(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 && value < 65_536 ? value : undefined;
}
