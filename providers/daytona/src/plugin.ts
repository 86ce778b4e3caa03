import type { PluginContext } from "@paperclipai/plugin-sdk";
import { assertOwnedBy, defineSandboxProvider, isProviderApiError, opaqueLeaseIdCodec } from "@paperclip-sandbox/kit";
import { createClientCache, type DaytonaClient } from "./client.js";
import { configWarnings, creationProblems, daytonaConfig, type DaytonaConfig } from "./config.js";
import { daytonaFiles, daytonaRunner } from "./exec.js";
import { DAYTONA_DRIVER_KEY, DAYTONA_SHAPE } from "./manifest.js";
import { createParams, createSandbox, deleteSandbox, findByLabels, getSandbox, handleOf, listedResource, startSandbox, stateOf, stopSandbox, type DaytonaHandle } from "./sandboxes.js";
import { createSessionRunner, daytonaSessionApi } from "./session-runner.js";
import { prepareWorkspace, workspaceFrom } from "./workspace.js";

export interface DaytonaPluginDeps {
  /** Where the DAYTONA_API_KEY fallback is read (default the worker's environment). */
  env?: NodeJS.ProcessEnv;
  /** The SDK client for a config (default one cached client per endpoint, target and key). */
  clientFor?: (config: DaytonaConfig) => DaytonaClient;
}

const leaseIds = opaqueLeaseIdCodec({ vendor: "daytona" });
const isLeaseId = (id: string) => {
  try {
    leaseIds.decode(id);
    return true;
  } catch {
    return false;
  }
};

export function createDaytonaPlugin(deps: DaytonaPluginDeps = {}) {
  let ctx: PluginContext | undefined;
  const clientFor =
    deps.clientFor ??
    createClientCache({ env: deps.env, onRetry: (operation, event) => ctx?.logger.warn(`daytona ${operation}: retrying in ${event.delayMs} ms after: ${event.error.message}`) });

  return defineSandboxProvider({
    driverKey: DAYTONA_DRIVER_KEY,
    config: daytonaConfig,
    transport: DAYTONA_SHAPE.transport,
    workspaceDir: (handle: DaytonaHandle) => handle.workdir,
    // A change of any of these means another sandbox (the kit puts company, environment, agent,
    // execution workspace and adapter type into the fingerprint itself).
    shape: (config) => ({ image: config.image, snapshot: config.snapshot, target: config.target, cpu: config.cpu, memory: config.memory, disk: config.disk, gpu: config.gpu }),
    defaultTimeoutMs: (config) => config.timeoutMs,
    validate: (config) => ({ errors: creationProblems(config), warnings: configWarnings(config, deps.env) }),
    setup: (context) => void (ctx = context),

    async create({ config, labels, expiresAt, signal, created }) {
      const problems = creationProblems(config);
      if (problems.length > 0) throw new Error(problems.join("; "));
      const client = clientFor(config);
      const sandbox = await createSandbox(client, createParams(config, { ...labels }, expiresAt), signal);
      created(sandbox.id);
      return handleOf(sandbox, await prepareWorkspace(client, sandbox));
    },
    async get(ref) {
      if (!isLeaseId(ref.providerLeaseId)) return null;
      const client = clientFor(ref.config);
      const sandbox = await getSandbox(client, ref.providerLeaseId);
      if (!sandbox || stateOf(sandbox) === null) return null;
      // A fresh worker learns the workspace from the lease (a stopped sandbox cannot be asked).
      const workdir = workspaceFrom(ref.metadata) ?? (sandbox.state === "started" ? await prepareWorkspace(client, sandbox) : "");
      return handleOf(sandbox, workdir);
    },
    async destroy(ref, handle) {
      const client = clientFor(ref.config);
      const sandbox = handle?.sandbox ?? (isLeaseId(ref.providerLeaseId) ? await getSandbox(client, ref.providerLeaseId) : null);
      if (!sandbox) return;
      // Never another company's or environment's sandbox, whatever id the call names.
      assertOwnedBy(sandbox.labels, { driverKey: DAYTONA_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId }, { resource: `daytona sandbox ${sandbox.id}` });
      await deleteSandbox(client, sandbox);
    },
    stop: (handle, ref) => stopSandbox(clientFor(ref.config), handle.sandbox),
    async start(handle, ref) {
      const client = clientFor(ref.config);
      await startSandbox(client, handle.sandbox);
      // A fresh handle: the old one's session ended with the stop.
      return handleOf(handle.sandbox, handle.workdir || (await prepareWorkspace(client, handle.sandbox)));
    },
    notRunning: (error) => isProviderApiError(error) && (error.code === "sandbox_not_started" || error.status === 502 || error.status === 503),

    runner(handle, config) {
      const client = clientFor(config);
      const files = daytonaFiles(client, handle);
      return config.liveOutput ? createSessionRunner(daytonaSessionApi(client, handle), files) : daytonaRunner(client, handle, files);
    },
    files: (handle, config) => daytonaFiles(clientFor(config), handle),
    list: async (config, labels) => (await findByLabels(clientFor(config), labels)).map(listedResource),
  }).plugin;
}

export default createDaytonaPlugin();
