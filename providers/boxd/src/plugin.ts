import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import { definePlugin, type PluginEnvironmentReleaseLeaseParams } from "@paperclipai/plugin-sdk";
import {
  defaultProbe,
  defineSandboxProvider,
  isProviderApiError,
  LeaseGoneError,
  pollUntil,
  probeResult,
  createSecretRedactor,
  withCommandChannel,
  type CreateInput,
  type LeaseRef,
  type ProbeFinding,
  type SandboxProviderDefinition,
} from "@paperclip-sandbox/kit";
import { createBoxdApi, type BoxdApi, type BoxdApiOptions, type BoxdMachine } from "./api.js";
import { apiKeyOf, boxdConfig, MEMORY_GIB, MISSING_KEY, type BoxdConfig, type boxdConfigSchema } from "./config.js";
import { confirmGone, isGoneStatus, machineName, makeRunning, settled, stateOf, WORKSPACE_DIR, type BoxdHandle } from "./machines.js";
import { BOXD_DRIVER_KEY } from "./manifest.js";
import { boxdTemplates } from "./templates.js";
import { createTokenCache, type TokenCache } from "./tokens.js";
import { BOXD_PTY_TRANSPORT, boxdTerminals, createBoxdRunner } from "./transport.js";

/** The probe's machine is deleted by boxd itself 15 minutes on, whatever happens to the probe. */
export const PROBE_DELETE_TIMER_MS = 15 * 60_000;
/** A delete timer is set this much before the requested deadline (the call's own latency). */
const DELETE_TIMER_MARGIN_S = 1;
/** How long `stop` waits for boxd to report `stopped`. */
const STOP_CONFIRM_MS = 120_000;
/**
 * A command channel with no command for this long closes. Its Exec is a command in flight, which
 * keeps the machine from idling: well under boxd's documented 30 s auto-suspend window, so an idle
 * channel does not hold a machine awake past what its operator configured (the host's commands come
 * every ~100 ms while a run is live, so a run keeps its channel).
 */
export const BOXD_CHANNEL_IDLE_MS = 10_000;

export interface BoxdPluginDeps {
  /** The worker's environment (the BOXD_API_KEY fallback). */
  env?: NodeJS.ProcessEnv;
  /** API key → JWT exchanges, shared by every client of the plugin. */
  tokens?: TokenCache;
  /** Builds the API client for a key and endpoint (tests may hand in a fake). */
  apiFor?: (options: BoxdApiOptions) => BoxdApi;
}

/** A lease made with one boxd account is never deleted with another account's key. */
export class BoxdAccountMismatchError extends Error {
  override readonly name = "BoxdAccountMismatchError";
  readonly code = "lease_not_owned";
}

/** The shape of `onEnvironmentInspectLease` (newer hosts): the machine's state, read without changing it. */
export interface BoxdInspection {
  providerLeaseId: string | null;
  state: "running" | "suspended" | "hibernated" | "stopped" | "destroyed" | string;
  metadata: Record<string, unknown>;
}

type ReleaseParams = PluginEnvironmentReleaseLeaseParams & { resourceDisposition?: "keep_running" | "stop_and_retain" | "destroy" };

export function createBoxdPlugin(deps: BoxdPluginDeps = {}) {
  const env = deps.env ?? process.env;
  const tokens = deps.tokens ?? createTokenCache();
  const apiFor = deps.apiFor ?? createBoxdApi;
  /** One client (one channel, one token) per key and endpoint. */
  const apis = new Map<string, BoxdApi>();
  /** What each machine's agent can do, kept across handles (learned from its first refusal). */
  const agents = new Map<string, { legacy: boolean }>();
  /** Set while a release or stop must end the machine's processes (a cold stop), not suspend them. */
  const coldStop = new AsyncLocalStorage<boolean>();

  function apiOf(config: BoxdConfig, from: NodeJS.ProcessEnv = env): BoxdApi {
    const apiKey = apiKeyOf(config, from);
    if (!apiKey) throw new Error(MISSING_KEY);
    const key = createHash("sha256").update(`${apiKey}\0${config.apiUrl}\0${config.exchangeUrl}`).digest("hex");
    let api = apis.get(key);
    if (!api) apis.set(key, (api = apiFor({ apiKey, apiUrl: config.apiUrl, exchangeUrl: config.exchangeUrl, tokens })));
    return api;
  }

  const agentOf = (id: string) => {
    let agent = agents.get(id);
    if (!agent) agents.set(id, (agent = { legacy: false }));
    return agent;
  };

  const handleOf = (api: BoxdApi, account: string, machine: BoxdMachine, expiresAt?: Date | null): BoxdHandle => ({
    providerLeaseId: machine.id,
    state: stateOf(machine.status),
    labels: machine.labels,
    expiresAt: machine.destroyAt ?? expiresAt ?? null,
    api,
    account,
    machine,
    target: { api, id: machine.id, agent: agentOf(machine.id) },
  });

  async function create({ config, params, labels, expiresAt, signal, created }: CreateInput<BoxdConfig>): Promise<BoxdHandle> {
    const api = apiOf(config);
    const account = await api.account(signal);
    // A template (checked by the kit to be this company's and environment's) wins over Snapshot; a restore keeps its size.
    const snapshot = config.templateRef ?? config.snapshot;
    const vcpu = config.templateRef ? undefined : config.vcpu;
    const made = await api.createMachine({ name: machineName(config.namePrefix, params.runId), labels: { ...labels }, org: config.org, vcpu, snapshot }, signal);
    created(made.id);
    // The delete timer: boxd itself deletes the machine at or before the deadline, even if we are gone.
    let deadline: Date | null = null;
    if (expiresAt) {
      const seconds = Math.floor((expiresAt.getTime() - Date.now()) / 1000) - DELETE_TIMER_MARGIN_S;
      if (seconds < 1) throw new Error(`boxd: the requested expiry ${expiresAt.toISOString()} is too close to set a delete timer before it`);
      const setAt = Date.now();
      await api.setDeleteTimer(made.id, seconds, signal);
      deadline = new Date(setAt + seconds * 1000);
    }
    // Running at once (the usual answer): what boxd would report is what was asked, no GetVm needed.
    let machine: BoxdMachine | null =
      made.status === "running"
        ? {
            id: made.id,
            name: made.name,
            status: "running",
            imageRef: "",
            vcpu: vcpu ?? 0,
            memoryBytes: 0,
            labels: { ...labels },
            org: config.org ?? "",
            isolated: true,
            createdAt: null,
            destroyAt: deadline,
          }
        : await settled(api, made.id, signal);
    if (!machine) throw new LeaseGoneError(`boxd machine ${made.id} disappeared right after it was created`);
    if (machine.status !== "running") machine = await makeRunning(api, machine, signal);
    return handleOf(api, account, machine, deadline);
  }

  /** The machine in whatever state boxd has it (a destroying or failed one is `ended`); null once boxd no longer has it. */
  async function get(ref: LeaseRef<BoxdConfig>): Promise<BoxdHandle | null> {
    const api = apiOf(ref.config);
    let machine = await api.getMachine(ref.providerLeaseId);
    if (!machine || machine.status === "destroyed" || machine.status === "deleted") return null;
    // A transitional status (booting, starting, migrating) settles first.
    if (stateOf(machine.status) === "running" && machine.status !== "running" && !isGoneStatus(machine.status)) machine = await settled(api, machine.id);
    if (!machine) return null;
    return handleOf(api, await api.account(), machine);
  }

  /** The kit has checked the labels; the account is boxd's own fence: a lease made with another key is not this key's to delete. */
  async function destroy(ref: LeaseRef<BoxdConfig>, handle: BoxdHandle): Promise<void> {
    const { api, machine } = handle;
    if (isGoneStatus(machine.status) && machine.status !== "destroying") return;
    const owner = typeof ref.metadata.account === "string" ? ref.metadata.account : undefined;
    if (owner !== undefined && owner !== handle.account) {
      throw new BoxdAccountMismatchError(`refusing to delete boxd machine ${machine.id}: its lease was made by boxd account ${owner}, the configured key belongs to ${handle.account}`);
    }
    if (machine.status !== "destroying") await api.destroyMachine(machine.id);
    await confirmGone(api, machine.id);
  }

  /**
   * Keeps a reusable lease. A plain release suspends the machine (memory, processes and disk kept;
   * resume wakes it); a release with cancelActiveWork, `stop_and_retain` or the stop hook stops it
   * cold (processes ended, disk kept) and answers once boxd reports it stopped.
   */
  async function keep(handle: BoxdHandle): Promise<void> {
    const { api } = handle;
    const id = handle.machine.id;
    /** A refusal because the machine is already in (or past) the wanted state is no failure. */
    const unlessAlready = async (call: Promise<unknown>, fine: readonly string[]) => {
      try {
        await call;
      } catch (error) {
        if (!(isProviderApiError(error) && error.code === "failed_precondition")) throw error;
        const seen = await api.getMachine(id);
        if (!seen || !fine.includes(seen.status)) throw error;
      }
    };
    if (coldStop.getStore() === true) {
      await unlessAlready(api.stopMachine(id), ["stopped"]);
      const seen = await pollUntil(
        () => api.getMachine(id),
        (now) => !now || isGoneStatus(now.status) || now.status === "stopped",
        { what: `boxd machine ${id} to report stopped`, timeoutMs: STOP_CONFIRM_MS, intervalMs: 25, maxIntervalMs: 500, describe: (now) => `it is ${now?.status}` },
      );
      if (!seen || isGoneStatus(seen.status)) throw new LeaseGoneError(`boxd machine ${id} is gone`);
      return;
    }
    await unlessAlready(api.suspendMachine(id), ["suspended", "hibernated", "stopped"]);
  }

  const definition: SandboxProviderDefinition<typeof boxdConfigSchema, BoxdHandle> = {
    driverKey: BOXD_DRIVER_KEY,
    config: boxdConfig,
    transport: BOXD_PTY_TRANSPORT,
    // `$HOME/paperclip-workspace` (/home/boxd/paperclip-workspace on boxd), made by the kit with one Exec.
    workspace: { homeSubdir: WORKSPACE_DIR },
    // A change of any of these means another machine (resume then provisions a fresh one).
    shape: (config) => ({ snapshot: config.snapshot ?? null, templateRef: config.templateRef ?? null, vcpu: config.vcpu ?? null, org: config.org ?? null, apiUrl: config.apiUrl }),
    // A reused lease is kept by `stop`: suspended at a plain release, stopped cold when work must end.
    keep: { reusable: (config) => config.reuseLease, by: "stop" },
    options: { commandTimeoutMs: (config) => config.timeoutMs },
    leaseMetadata: (handle) => ({
      machineName: handle.machine.name,
      account: handle.account,
      ...(handle.machine.org ? { org: handle.machine.org } : {}),
      ...(handle.machine.vcpu ? { vcpu: handle.machine.vcpu } : {}),
    }),
    templates: boxdTemplates((config) => apiOf(config)),
    validate: (config) => ({ errors: apiKeyOf(config, env) ? [] : [MISSING_KEY] }),
    create,
    get,
    destroy,
    stop: (handle) => keep(handle),
    async start(handle, _ref, signal) {
      // A handle that says running is stale (a command found the machine stopped): look again.
      const current = handle.state === "running" ? await handle.api.getMachine(handle.machine.id, signal) : handle.machine;
      if (!current || isGoneStatus(current.status)) throw new LeaseGoneError(`boxd machine ${handle.machine.id} is gone`);
      const machine = await makeRunning(handle.api, current, signal);
      return handleOf(handle.api, handle.account, machine);
    },
    // Exec on a stopped machine is refused (FAILED_PRECONDITION): the kit starts it and runs the command once more.
    notRunning: (error) => isProviderApiError(error) && error.vendor === "boxd" && error.code === "failed_precondition" && /stopped/i.test(error.detail),
    runner: (handle) => {
      // Commands over one long Exec per lease (the kit's command channel), each a fresh Exec when it
      // is down; a fresh Exec reports a signalled command as the shell does (withRemoteGroupKill).
      const runner = withCommandChannel(createBoxdRunner(handle.target), { lease: handle.providerLeaseId, signalsAsExitStatus: true, idleMs: BOXD_CHANNEL_IDLE_MS });
      return { capabilities: BOXD_PTY_TRANSPORT, run: (script, io) => runner.run(script, io), pty: boxdTerminals(handle.target, runner) };
    },
    // Suspended, stopped and failed machines too (whatever the state); inside the worker without `env`.
    async list(config, labels, { env: from, signal }) {
      const api = from ? createBoxdApi({ apiKey: apiKeyOf(config, from) ?? "", apiUrl: config.apiUrl, exchangeUrl: config.exchangeUrl, tokens }) : apiOf(config);
      try {
        return (await api.listMachines({ org: config.org, labels }, signal))
          .filter((m) => m.status !== "destroyed" && m.status !== "deleted")
          .map((m) => ({
            providerLeaseId: m.id,
            labels: m.labels,
            state: m.status,
            ...(m.createdAt ? { createdAt: m.createdAt.toISOString() } : {}),
            expiresAt: m.destroyAt ? m.destroyAt.toISOString() : null,
            metadata: { machineName: m.name },
          }));
      } finally {
        if (from) api.close();
      }
    },
    async probe(config, params) {
      // The probe's machine carries a 15-minute delete timer: boxd removes it even if the probe is cut off.
      const probing: typeof definition = {
        ...definition,
        create: (input) => definition.create({ ...input, expiresAt: new Date(Math.min(input.expiresAt?.getTime() ?? Infinity, Date.now() + PROBE_DELETE_TIMER_MS)) }),
      };
      const base = await defaultProbe(probing, config, params);
      const findings: ProbeFinding[] = [...(base.diagnostics ?? [])];
      if (base.ok && config.vcpu !== undefined) {
        findings.push({ severity: "info", code: "BOXD_SIZE", message: `machines have ${config.vcpu} vCPU and ${MEMORY_GIB[config.vcpu]} GiB` });
      }
      return probeResult("boxd sandbox", findings);
    },
    shutdown() {
      for (const api of apis.values()) api.close();
      apis.clear();
    },
  };

  const provider = defineSandboxProvider(definition);
  const hooks = provider.plugin.definition as typeof provider.plugin.definition & {
    onEnvironmentStopLease(params: ReleaseParams): Promise<unknown>;
  };
  const cold = (params: ReleaseParams) => params.cancelActiveWork === true || params.resourceDisposition === "stop_and_retain";

  /** Newer hosts: the machine's state as boxd reports it, changing nothing. */
  async function inspect(params: { providerLeaseId: string | null; config: Record<string, unknown>; leaseMetadata?: Record<string, unknown> }): Promise<BoxdInspection> {
    const config = boxdConfig.parse(params.config);
    const { redact } = createSecretRedactor([apiKeyOf(config, env) ?? ""].filter(Boolean));
    try {
      if (!params.providerLeaseId) return { providerLeaseId: null, state: "destroyed", metadata: {} };
      const machine = await apiOf(config).getMachine(params.providerLeaseId);
      if (!machine || isGoneStatus(machine.status)) return { providerLeaseId: params.providerLeaseId, state: "destroyed", metadata: { expired: true } };
      return {
        providerLeaseId: machine.id,
        state: machine.status,
        metadata: { machineName: machine.name, vcpu: machine.vcpu, memoryBytes: machine.memoryBytes, expiresAt: machine.destroyAt?.toISOString() ?? null },
      };
    } catch (error) {
      throw new Error(redact((error as Error).message));
    }
  }

  const plugin = definePlugin({
    ...hooks,
    onEnvironmentReleaseLease: (params: ReleaseParams) => coldStop.run(cold(params), () => hooks.onEnvironmentReleaseLease!(params)),
    onEnvironmentStopLease: (params: ReleaseParams) => coldStop.run(true, () => hooks.onEnvironmentStopLease(params)),
    onEnvironmentInspectLease: inspect,
  } as Parameters<typeof definePlugin>[0]);

  return { plugin, definition, tokens, apiOf, listLeases: provider.listLeases };
}

const boxd = createBoxdPlugin();
export default boxd.plugin;
/** For `leases gc`: the org's machines labelled for this provider (derived from `list` by the kit). */
export const listLeases = boxd.listLeases;
