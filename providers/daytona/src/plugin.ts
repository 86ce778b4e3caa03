import type { PluginContext } from "@paperclipai/plugin-sdk";
import { defineSandboxProvider, isProviderApiError, opaqueLeaseIdCodec } from "@paperclip-sandbox/kit";
import { createClientPool, type DaytonaClient } from "./client.js";
import { configWarnings, creationProblems, daytonaConfig, type DaytonaConfig } from "./config.js";
import { daytonaFiles, daytonaRunner } from "./exec.js";
import { DAYTONA_DRIVER_KEY, DAYTONA_SHAPE } from "./manifest.js";
import { daytonaPty } from "./pty.js";
import { createParams, createSandbox, deleteSandbox, findByLabels, getSandbox, handleOf, listedResource, startSandbox, stateOf, stopSandbox } from "./sandboxes.js";
import { createSessionRunner, daytonaSessionApi } from "./session-runner.js";
import { daytonaTemplates } from "./templates.js";

export interface DaytonaPluginDeps {
  /** Where the DAYTONA_API_KEY fallback is read (default the worker's environment). */
  env?: NodeJS.ProcessEnv;
  /** The SDK client for a config (default one cached client per endpoint, target and key); `env` when listing outside the worker. */
  clientFor?: (config: DaytonaConfig, env?: NodeJS.ProcessEnv) => DaytonaClient;
}

const leaseIds = opaqueLeaseIdCodec({ vendor: "daytona" });

export function createDaytonaProvider(deps: DaytonaPluginDeps = {}) {
  let ctx: PluginContext | undefined;
  const clientFor =
    deps.clientFor ?? createClientPool({ env: deps.env, onRetry: (operation, event) => ctx?.logger.warn(`daytona ${operation}: retrying in ${event.delayMs} ms after: ${event.error.message}`) });

  return defineSandboxProvider({
    driverKey: DAYTONA_DRIVER_KEY,
    config: daytonaConfig,
    transport: DAYTONA_SHAPE.transport,
    // Under the sandbox user's home, as upstream's provider puts it.
    workspace: { homeSubdir: "paperclip-workspace" },
    // A change of any of these means another sandbox (the kit puts company, environment, agent,
    // execution workspace and adapter type into the fingerprint itself).
    shape: (config) => ({ image: config.image, snapshot: config.snapshot, target: config.target, cpu: config.cpu, memory: config.memory, disk: config.disk, gpu: config.gpu }),
    options: { commandTimeoutMs: (config) => config.timeoutMs },
    keep: { reusable: (config) => config.reuseLease, by: "stop" },
    validate: (config) => ({ errors: creationProblems(config), warnings: configWarnings(config, deps.env) }),
    setup: (context) => void (ctx = context),

    async create({ config, labels, expiresAt, signal, created }) {
      const sandbox = await createSandbox(clientFor(config), createParams(config, { ...labels }, expiresAt), signal);
      created(sandbox.id);
      return handleOf(sandbox);
    },
    async get(ref) {
      if (!leaseIds.is(ref.providerLeaseId)) return null;
      const sandbox = await getSandbox(clientFor(ref.config), ref.providerLeaseId);
      return sandbox && stateOf(sandbox) !== null ? handleOf(sandbox) : null;
    },
    destroy: (ref, handle) => deleteSandbox(clientFor(ref.config), handle.sandbox),
    stop: (handle, ref) => stopSandbox(clientFor(ref.config), handle.sandbox),
    async start(handle, ref) {
      await startSandbox(clientFor(ref.config), handle.sandbox);
      // A fresh handle: the old one's session ended with the stop.
      return handleOf(handle.sandbox);
    },
    notRunning: (error) => isProviderApiError(error) && (error.code === "sandbox_not_started" || error.status === 502 || error.status === 503),

    runner(handle, config) {
      const client = clientFor(config);
      const files = daytonaFiles(client, handle);
      const runner = config.liveOutput ? createSessionRunner(daytonaSessionApi(client, handle), files) : daytonaRunner(client, handle, files);
      // Login terminals on the toolbox's PTY sessions; signals other than SIGKILL go through the runner.
      return { capabilities: Object.freeze({ ...runner.capabilities, pty: true }), run: (script, io) => runner.run(script, io), pty: daytonaPty(client, handle, runner) };
    },
    files: (handle, config) => daytonaFiles(clientFor(config), handle),
    list: async (config, labels, { env }) => (await findByLabels(clientFor(config, env), labels)).map(listedResource),
    templates: daytonaTemplates((config) => clientFor(config)),
  });
}

export const createDaytonaPlugin = (deps: DaytonaPluginDeps = {}) => createDaytonaProvider(deps).plugin;

const provider = createDaytonaProvider();
/** For `paperclip-sandbox leases gc --provider daytona`: this provider's sandboxes, listed by label at Daytona. */
export const listLeases = provider.listLeases;
export default provider.plugin;
