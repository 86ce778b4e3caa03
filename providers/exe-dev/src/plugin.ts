import { rm } from "node:fs/promises";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import {
  assertOwnedBy,
  createIdempotently,
  defineSandboxProvider,
  OPENSSH_TRANSPORT,
  withInlineEnv,
  withRemoteGroupKill,
  type LeaseRef,
  type SandboxHandle,
  type ScriptRunner,
  type SshDestination,
} from "@paperclip-sandbox/kit";
import { createExeDevApi, type ExeDevApi, type VmRecord } from "./api.js";
import { apiKeyOf, configProblems, envOf, exeDevConfig, normalizeApiUrl, sshIdentityOf, type ExeDevConfig } from "./config.js";
import { EXE_DEV_DRIVER_KEY, EXE_DEV_SHAPE } from "./manifest.js";
import { isVmName, labelsOf, tagOf, tagsOf, vmNameFor } from "./vm-names.js";
import { connectWhenUp, destinationOf, environmentDir, openVmSession, recordedHostKeys, runtimeBase, sweepStaleSessions } from "./vm-ssh.js";
import type { OpenSshSession } from "@paperclip-sandbox/kit";

export interface ExeDevHandle extends SandboxHandle {
  vm: VmRecord;
  destination: SshDestination;
  /** The lease's workspace (`$HOME/paperclip-workspace` on the VM). */
  workdir: string;
  /** The VM's host-key lines as first recorded (lease metadata; restored in a fresh worker). */
  hostKeys: string[];
  /** The lease's company and environment as the host names them (the host-key directory is theirs). */
  owner: { companyId: string; environmentId: string };
}

export interface ExeDevPluginDeps {
  /** Where the EXE_API_KEY fallback is read (default the worker's environment). */
  env?: NodeJS.ProcessEnv;
  /** The API client for a config (default: one per endpoint and token). */
  apiFor?: (config: ExeDevConfig) => ExeDevApi;
  /** Parent of the worker's SSH state directory (default the OS temp dir). */
  runtimeParent?: string;
}

interface Connection {
  session: OpenSshSession;
  knownHostsFile: string;
}

const WORKSPACE_SCRIPT = `set -e; __pc_d="\${HOME:-/root}/paperclip-workspace"; mkdir -p "$__pc_d"; cd "$__pc_d"; pwd -P`;
/** How long release waits for `ls` to stop listing a deleted VM. */
const GONE_WAIT_MS = 60_000;

export function createExeDevPlugin(deps: ExeDevPluginDeps = {}) {
  let ctx: PluginContext | undefined;
  const clients = new Map<string, ExeDevApi>();
  const apiFor =
    deps.apiFor ??
    ((config: ExeDevConfig) => {
      const apiKey = apiKeyOf(config, deps.env);
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
  const base = () => runtimeBase(deps.runtimeParent);

  const identityOf = (config: ExeDevConfig) => {
    const checked = sshIdentityOf(config);
    if (!checked.ok) throw new Error(checked.problem);
    if ("repaired" in checked.identity) for (const repair of checked.identity.repaired) ctx?.logger.warn(`exe.dev SSH private key: ${repair}`);
    return checked.identity;
  };

  const connectionFor = (handle: ExeDevHandle, config: ExeDevConfig): Promise<Connection> => {
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
    await (await connection?.catch(() => undefined))?.session.close();
  };

  /** Runs a script on the VM and returns its stdout (setup steps of the provider itself). */
  const capture = async (runner: ScriptRunner, script: string): Promise<string> => {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const exit = await runner.run(script, { stdout: (chunk) => out.push(chunk), stderr: (chunk) => err.push(chunk) });
    if (exit.exitCode !== 0) throw new Error(`exe.dev VM setup step failed (exit ${exit.exitCode}): ${Buffer.concat(err).toString("utf8").trim().slice(0, 400)}`);
    return Buffer.concat(out).toString("utf8").trim();
  };

  return defineSandboxProvider({
    driverKey: EXE_DEV_DRIVER_KEY,
    config: exeDevConfig,
    transport: EXE_DEV_SHAPE.transport,
    workspaceDir: (handle: ExeDevHandle) => handle.workdir,
    // A change of any of these means another VM.
    shape: (config) => ({ image: config.image, cpu: config.cpu, memory: config.memory, disk: config.disk, setupScript: config.setupScript, env: config.env, tags: config.tags }),
    defaultTimeoutMs: (config) => config.timeoutMs,
    validate: (config) => configProblems(config, deps.env),
    setup: async (context) => {
      ctx = context;
      await sweepStaleSessions(await base()).catch(() => 0);
    },
    shutdown: async () => {
      await Promise.allSettled([...connections.keys()].map((name) => closeConnection(name)));
    },

    async create({ config, params, labels, signal, created }) {
      const identity = identityOf(config);
      const api = apiFor(config);
      const tags = [...tagsOf(labels), ...config.tags.filter((tag) => !tag.startsWith("paperclip-"))];
      const nameOf = (nonce: string) => vmNameFor(config.namePrefix, params.environmentId, nonce);
      const vm = await createIdempotently({
        create: (nonce) =>
          api.newVm({ name: nameOf(nonce), tags, image: config.image, cpu: config.cpu, memory: config.memory, disk: config.disk, env: envOf(config), setupScript: config.setupScript }, signal),
        find: (nonce) => api.find(nameOf(nonce), signal),
        signal,
      });
      created(vm.name);
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
      // A new VM's sshd may still be starting; its key is recorded on this first connection.
      await connectWhenUp(session, signal);
      const workdir = await capture(session.runner, WORKSPACE_SCRIPT);
      return {
        providerLeaseId: vm.name,
        vm,
        destination,
        workdir,
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
      const destination = destinationOf(vm, ref.config, numberOr(metadata.vmSshPort));
      const handle: ExeDevHandle = {
        providerLeaseId: vm.name,
        vm,
        destination,
        workdir: typeof metadata.remoteCwd === "string" ? metadata.remoteCwd : "",
        hostKeys: Array.isArray(metadata.vmHostKeys) ? metadata.vmHostKeys.filter((line): line is string => typeof line === "string") : [],
        labels: labelsOf(vm.tags),
        owner: { companyId: ref.companyId, environmentId: ref.environmentId },
        state: "running",
        expiresAt: null,
      };
      // Only another company's or environment's VM (the kit refuses it) is left unopened.
      if (!handle.workdir && ownedByRef(handle, ref)) handle.workdir = await capture((await connectionFor(handle, ref.config)).session.runner, WORKSPACE_SCRIPT);
      return handle;
    },

    async destroy(ref, handle) {
      const name = ref.providerLeaseId;
      if (!isVmName(name)) return;
      await closeConnection(name);
      const api = apiFor(ref.config);
      const vm = handle?.vm ?? (await api.find(name));
      if (vm) {
        // Never another company's or environment's VM, whatever name the call gives.
        assertOwnedBy(labelsOf(vm.tags), { driverKey: EXE_DEV_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId }, { resource: `exe.dev VM ${name}` });
        await api.remove(name);
        // The receipt only once exe.dev no longer lists it.
        await waitUntilUnlisted(api, name);
      }
      const root = await base();
      await rm(`${await environmentDir(root, ref.companyId, ref.environmentId)}/${name}.known_hosts`, { force: true });
    },

    // exe.dev has no stop: a kept lease keeps its VM running; only this worker's connection ends.
    stop: (handle) => closeConnection(handle.providerLeaseId),

    runner(handle, config) {
      const lazy = (pick: (connection: Connection) => ScriptRunner): ScriptRunner => ({
        capabilities: OPENSSH_TRANSPORT,
        run: async (script, io) => pick(await connectionFor(handle, config)).run(script, io),
      });
      return withRemoteGroupKill(withInlineEnv(lazy((c) => c.session.runner)), { killRunner: lazy((c) => c.session.controlRunner) });
    },

    leaseMetadata: (handle) => ({
      vmName: handle.providerLeaseId,
      vmSshHost: handle.destination.host,
      vmSshPort: handle.destination.port,
      ...(handle.destination.user ? { vmSshUser: handle.destination.user } : {}),
      vmHostKeys: handle.hostKeys,
      ...(handle.vm.httpsUrl ? { httpsUrl: handle.vm.httpsUrl } : {}),
    }),

    async list(config, labels) {
      const filter = labels["paperclip-environment"] ? tagOf("paperclip-environment", labels["paperclip-environment"]) : tagOf("paperclip-provider", EXE_DEV_DRIVER_KEY);
      return (await apiFor(config).list(filter))
        .map((vm) => ({ vm, labels: labelsOf(vm.tags) }))
        .filter(({ labels: have }) => Object.entries(labels).every(([key, value]) => have[key] === value))
        .map(({ vm, labels: have }) => ({ providerLeaseId: vm.name, labels: have, state: vm.status }));
    },
  }).plugin;
}

function ownedByRef(handle: ExeDevHandle, ref: LeaseRef<ExeDevConfig>): boolean {
  const labels = handle.labels ?? {};
  return labels["paperclip-environment"] === undefined || labels["paperclip-environment"] === ref.environmentId.toLowerCase();
}

async function waitUntilUnlisted(api: ExeDevApi, name: string): Promise<void> {
  const deadline = Date.now() + GONE_WAIT_MS;
  let pause = 100;
  while (await api.find(name)) {
    if (Date.now() > deadline) throw new Error(`exe.dev still lists VM ${name} ${GONE_WAIT_MS / 1000} s after rm: not confirmed deleted`);
    await new Promise((resolve) => setTimeout(resolve, pause));
    pause = Math.min(pause * 2, 2_000);
  }
}

function numberOr(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 && value < 65_536 ? value : undefined;
}

export default createExeDevPlugin();
