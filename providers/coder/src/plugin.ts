import type { PluginContext, PluginEnvironmentRealizeWorkspaceParams } from "@paperclipai/plugin-sdk";
import { definePlugin } from "@paperclipai/plugin-sdk";
import {
  createIdempotently,
  defineSandboxProvider,
  isProviderApiError,
  LeaseOwnershipError,
  withCommandChannel,
  type FileTransport,
  type LeaseRef,
  type ListedResource,
  type ScriptRunner,
} from "@paperclip-sandbox/kit";
import { JOB_ACTIVE, type Workspace, type WorkspaceAgent } from "./coder-api.js";
import { coderConfig, configProblems, configWarnings, workspaceDirOf, type CoderConfig } from "./config.js";
import { KeyedLock } from "./keyed-lock.js";
import { CODER_DRIVER_KEY, CODER_SHAPE } from "./manifest.js";
import { labelsOfName, nameMatchesLabels, ownerLabels, workspaceNameFor } from "./names.js";
import { realizeRepository, sourceOf } from "./realize.js";
import { createSessionCache, parameterProblems, type SessionDeps } from "./session.js";
import { appNotRunning, bufferedRunner, probeRunner, streamRunner, type AppProxyTarget } from "./transports/app-proxy.js";
import { ptyFiles, rptyRunner, rptyTerminals } from "./transports/rpty.js";
import { removeCliConfigDir, sshRunner } from "./transports/ssh.js";
import { commandBaseEnv } from "./workspace-env.js";
import { deleteWorkspace, isDeleted, pickAgent, settledWorkspace, startWorkspace, stopWorkspace, waitForBuild, waitReady, type CoderHandle, type Waiting } from "./workspaces.js";

export interface CoderPluginDeps {
  /** Where CODER_URL, CODER_SESSION_TOKEN, CODER_HEADER*, GITHUB_APP_* are read (default the worker's environment). */
  env?: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** fetch for Coder's control plane and GitHub (tests). */
  fetch?: typeof globalThis.fetch;
  /** GitHub's API root for token minting (tests point it at a local fake). */
  githubApiUrl?: string;
  sleep?: Waiting["sleep"];
}

/** Coder's workspace UUIDs: the only lease ids this provider acts on. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CLAIM_FILE = "$HOME/.paperclip-claim";

/** Lease metadata keys (the host merges them into the config: none may be a config field's name). */
export const META = {
  workspaceId: "coderWorkspaceId",
  workspaceName: "coderWorkspaceName",
  namePrefix: "coderNamePrefix",
  owner: "coderOwner",
  agent: "coderAgent",
  workerImage: "coderWorkerImage",
} as const;

/** The name prefix a lease was made with (the config's may have changed since). */
function prefixOf(ref: LeaseRef<CoderConfig>): string {
  const recorded = ref.metadata[META.namePrefix];
  return typeof recorded === "string" ? recorded : ref.config.workspaceName;
}

/** A lease record this provider cannot act on safely (an old one without the workspace's UUID). */
export class UnsafeLeaseRecordError extends Error {
  override name = "UnsafeLeaseRecordError";
  readonly code = "lease_record_without_uuid";
}

/** Accessing a handle's workspace needs the deployment and token (kept in this worker only). */
interface Access {
  url: string;
  token: string;
}

type Handle = CoderHandle & { access: Access; transport: CoderConfig["commandTransport"] };

export function createCoderProvider(deps: CoderPluginDeps = {}) {
  const env = deps.env ?? process.env;
  let ctx: PluginContext | undefined;
  const log = (message: string) => ctx?.logger.warn(message);
  const sessionDeps = (environment: NodeJS.ProcessEnv): SessionDeps => ({ env: environment, platform: deps.platform, fetch: deps.fetch, log });
  const sessionFor = createSessionCache(sessionDeps(env));
  const lock = new KeyedLock();
  /** The latest handle of each lease this worker serves (for realization, which the kit does not pass one). */
  const handles = new Map<string, Handle>();
  const waiting = (signal?: AbortSignal): Waiting => ({ signal, sleep: deps.sleep });

  const remember = (handle: Handle): Handle => {
    handles.set(handle.providerLeaseId, handle);
    return handle;
  };

  const handleOf = (workspace: Workspace, agent: WorkspaceAgent | undefined, config: CoderConfig, access: Access, labels: Record<string, string>, runner?: CoderHandle["runner"]): Handle => {
    const deadline = workspace.latest_build.deadline ? new Date(workspace.latest_build.deadline) : null;
    return {
      providerLeaseId: workspace.id,
      workspaceId: workspace.id,
      workspace,
      agent,
      runner,
      state: workspace.latest_build.status === "running" ? "running" : "stopped",
      // Coder stops the workspace at its deadline: past it, the lease's processes are gone.
      expiresAt: deadline && deadline.getTime() > 0 ? deadline : null,
      labels,
      access,
      transport: config.commandTransport,
    };
  };

  const appTarget = (handle: Handle, config: CoderConfig): AppProxyTarget => ({
    coderUrl: handle.access.url,
    token: handle.access.token,
    owner: handle.workspace.owner_name,
    workspace: handle.workspace.name,
    agent: handle.agent?.name ?? "main",
    slug: config.runnerAppSlug,
  });

  const runnerOf = (handle: Handle, config: CoderConfig): ScriptRunner => {
    const baseEnv = commandBaseEnv(handle.agent?.environment_variables);
    if (config.commandTransport === "rpty") return rptyRunner({ coderUrl: handle.access.url, token: handle.access.token, agentId: handle.agent?.id ?? "" }, baseEnv);
    if (config.commandTransport === "ssh") {
      return sshRunner(
        {
          coderBin: config.coderBin,
          coderUrl: handle.access.url,
          token: handle.access.token,
          owner: handle.workspace.owner_name,
          workspace: handle.workspace.name,
          agent: handle.agent?.name ?? "main",
          env,
        },
        baseEnv,
      );
    }
    const target = appTarget(handle, config);
    // Without a health answer yet (a fresh worker found the app not answering): our runner's stream route.
    return handle.runner && !handle.runner.stream ? bufferedRunner(target, baseEnv, handle.runner) : streamRunner(target, baseEnv);
  };

  /** Asks the runner app what it offers (app-proxy only). */
  const withRunnerHealth = async (handle: Handle, config: CoderConfig, signal?: AbortSignal): Promise<Handle> => {
    if (config.commandTransport !== "app-proxy" || handle.state !== "running") return handle;
    handle.runner = await probeRunner(appTarget(handle, config), signal);
    return handle;
  };

  /**
   * The marker claim: `$HOME/.paperclip-claim` written with the workspace's UUID and name, read
   * back through the command transport. It proves the transport reaches this very workspace (the
   * app proxy routes by name, which Coder lets others reuse).
   */
  const claim = async (handle: Handle, config: CoderConfig, signal?: AbortSignal): Promise<void> => {
    const text = JSON.stringify({ workspaceId: handle.workspaceId, name: handle.workspace.name });
    const script = `(umask 077 && printf '%s\\n' "$PAPERCLIP_CLAIM" > "${CLAIM_FILE}") && cat -- "${CLAIM_FILE}"`;
    const out: Buffer[] = [];
    const exit = await runnerOf(handle, config).run(script, { env: { PAPERCLIP_CLAIM: text }, stdout: (chunk) => void out.push(chunk), signal });
    const seen = Buffer.concat(out).toString("utf8").trim();
    if (exit.exitCode !== 0 || seen !== text) {
      throw new Error(`coder workspace ${handle.workspace.name}: the marker claim failed (${exit.exitCode !== 0 ? `exit ${exit.exitCode ?? exit.signal}` : "the workspace holds another claim"})`);
    }
  };

  /** Refuses a lease record this provider must not act on: no UUID (an old record), or metadata naming another workspace. */
  const checkRecord = (ref: LeaseRef<CoderConfig>) => {
    if (!UUID.test(ref.providerLeaseId)) {
      throw new UnsafeLeaseRecordError(
        `refusing to touch coder lease ${JSON.stringify(ref.providerLeaseId.slice(0, 80))}: the record holds no workspace UUID (an old record); names can be reused in Coder, so only a UUID is acted on. Delete the workspace in Coder by hand.`,
      );
    }
    const recorded = ref.metadata[META.workspaceId];
    if (recorded !== undefined && recorded !== ref.providerLeaseId) {
      throw new UnsafeLeaseRecordError(`refusing to touch coder lease ${ref.providerLeaseId}: its metadata names workspace ${String(recorded)}`);
    }
  };

  /** The workspace must be the one the lease names: made for this company and environment, under the recorded name. */
  const authorizer = (ref: LeaseRef<CoderConfig>) => ({
    authorize: (workspace: Workspace) => {
      const prefix = prefixOf(ref);
      const expected = ownerLabels({ driverKey: CODER_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId });
      const mismatches = [];
      if (!nameMatchesLabels(workspace.name, prefix, expected))
        mismatches.push({ label: "workspace name", expected: `${prefix}-<hash of this provider, company and environment>`, actual: workspace.name });
      const recordedName = ref.metadata[META.workspaceName];
      if (typeof recordedName === "string" && recordedName !== workspace.name) mismatches.push({ label: "recorded name", expected: recordedName, actual: workspace.name });
      if (mismatches.length > 0) throw new LeaseOwnershipError(`coder workspace ${workspace.id}`, mismatches);
    },
  });

  const kit = defineSandboxProvider({
    driverKey: CODER_DRIVER_KEY,
    config: coderConfig,
    transport: CODER_SHAPE.transport,
    // A direct child of /home/coder (validated); the kit makes it through the runner after create.
    workspace: { path: (config) => workspaceDirOf(config) },
    // A change of any of these means another workspace (the kit adds company, environment, agent, run scope).
    shape: (config) => ({
      coderUrl: config.coderUrl,
      template: config.template,
      workspaceParameters: config.workspaceParameters,
      workspaceName: config.workspaceName,
      commandTransport: config.commandTransport,
      runnerAppSlug: config.runnerAppSlug,
    }),
    keep: { reusable: (config) => config.reuseLease, by: "stop" },
    options: { ttlMs: (config) => config.stopAfterHours * 3_600_000, commandTimeoutMs: (config) => config.timeoutMs },
    validate: (config) => ({ errors: configProblems(config, deps.platform, env), warnings: configWarnings(config, env) }),
    setup: (context) => void (ctx = context),
    // The ssh transport's CLI config directory is the worker's: it goes with it.
    shutdown: () => removeCliConfigDir(),

    async create({ config, labels, expiresAt, signal, created, params }) {
      // (validate ran before this: the kit refuses a config with problems without calling create)
      const session = await sessionFor(config);
      const template = await session.template(config.template, signal);
      const problems = parameterProblems(config.workspaceParameters, template, config.template);
      if (problems.length > 0) throw new Error(problems.join("; "));
      const name = workspaceNameFor(config.workspaceName, labels);
      // Coder's TTL counts from the end of the start build, in whole minutes: at most the lease's end, at least a minute.
      // Without a deadline from the host the lease lives Stop after (its whole hours).
      const ttlMs = !params.requestedExpiresAt ? config.stopAfterHours * 3_600_000 : expiresAt ? Math.max(60_000, Math.floor((expiresAt.getTime() - Date.now()) / 60_000) * 60_000) : undefined;
      // The name is this acquisition's own: a create whose answer was lost is found by it, never made twice.
      const workspace = await createIdempotently({
        create: () =>
          session.api.createWorkspace(
            {
              name,
              template_id: template.template.id,
              rich_parameter_values: Object.entries(config.workspaceParameters).map(([key, value]) => ({ name: key, value })),
              ...(ttlMs !== undefined ? { ttl_ms: ttlMs } : {}),
              automatic_updates: "never",
            },
            signal,
          ),
        find: async () => (await session.api.workspaceByName(name, signal)) ?? undefined,
        signal,
      });
      // From here a failure (build, readiness, claim) deletes this workspace: the kit destroys what was named.
      created(workspace.id);
      return lock.run(workspace.id, async () => {
        const build = await waitForBuild(session, workspace.latest_build.id, waiting(signal));
        if (build.job.status !== "succeeded") throw new Error(`coder workspace ${name}: the start build ${build.job.status}${build.job.error ? `: ${build.job.error}` : ""}`);
        let ready = await waitReady(session, workspace.id, config, waiting(signal));
        const deadline = ready.workspace.latest_build.deadline;
        if (expiresAt && deadline && Date.parse(deadline) > expiresAt.getTime()) {
          // The build took long enough to push the deadline past the lease's end: move it back when Coder allows it.
          if (
            await session.api.extend(workspace.id, expiresAt.toISOString(), signal).then(
              () => true,
              () => false,
            )
          ) {
            ready = { ...ready, workspace: (await session.api.workspace(workspace.id, signal)) ?? ready.workspace };
          }
        }
        const handle = handleOf(ready.workspace, ready.agent, config, { url: session.url, token: session.token }, { ...labels });
        await withRunnerHealth(handle, config, signal);
        await claim(handle, config, signal);
        return remember(handle);
      });
    },

    async get(ref) {
      // Never "gone" for a record this provider cannot read: the kit would report it destroyed.
      checkRecord(ref);
      const session = await sessionFor(ref.config);
      let workspace = await session.api.workspace(ref.providerLeaseId);
      if (workspace && JOB_ACTIVE.has(workspace.latest_build.job.status)) workspace = await settledWorkspace(session, ref.providerLeaseId, waiting());
      if (!workspace || isDeleted(workspace)) return null;
      const prefix = prefixOf(ref);
      const labels = labelsOfName(workspace.name, prefix, { driverKey: CODER_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId });
      const handle = handleOf(workspace, pickAgent(workspace, ref.config), ref.config, { url: session.url, token: session.token }, labels);
      if (handle.state === "running") await withRunnerHealth(handle, ref.config).catch(() => undefined);
      return remember(handle);
    },

    async destroy(ref) {
      checkRecord(ref);
      const session = await sessionFor(ref.config);
      await lock.run(ref.providerLeaseId, () => deleteWorkspace(session, ref.providerLeaseId, authorizer(ref), waiting()));
      handles.delete(ref.providerLeaseId);
    },

    async stop(handle, ref) {
      checkRecord(ref);
      const session = await sessionFor(ref.config);
      await lock.run(handle.providerLeaseId, () => stopWorkspace(session, handle.providerLeaseId, authorizer(ref), waiting()));
    },

    async start(_handle, ref, signal) {
      checkRecord(ref);
      const config = ref.config;
      const session = await sessionFor(config);
      return lock.run(ref.providerLeaseId, async () => {
        const ready = await startWorkspace(session, ref.providerLeaseId, config, authorizer(ref), waiting(signal));
        const prefix = prefixOf(ref);
        const labels = labelsOfName(ready.workspace.name, prefix, { driverKey: CODER_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId });
        const handle = handleOf(ready.workspace, ready.agent, config, { url: session.url, token: session.token }, labels);
        // No claim check here: a kept lease's sentinel (the kit reads it next) names this lease.
        await withRunnerHealth(handle, config, signal);
        return remember(handle);
      });
    },

    // The app proxy answers 502 for a workspace that is not running; the PTY 428 for an agent not connected.
    notRunning: (error) => appNotRunning(error) || (isProviderApiError(error) && error.operation === "agentPty" && (error.status === 428 || error.status === 404)),

    // Whatever carries commands, login terminals are the agent's reconnecting PTY.
    runner: (handle: Handle, config) => {
      // Commands over one long command per lease (the kit's command channel) where the transport
      // streams stdin and live output (app-proxy's stream route, ssh); a command of its own when it
      // is down. The runner app reports a signal by name; ssh's group kill, as the shell does.
      const runner = withCommandChannel(runnerOf(handle, config), { lease: handle.providerLeaseId, signalsAsExitStatus: config.commandTransport === "ssh" });
      const pty = rptyTerminals({ coderUrl: handle.access.url, token: handle.access.token, agentId: handle.agent?.id ?? "" }, runner);
      return { capabilities: { ...runner.capabilities, pty: true }, run: (script, io) => runner.run(script, io), pty };
    },
    // Only the terminal needs a file transport (the runner's stream carries bytes itself).
    files: (handle: Handle, config) =>
      config.commandTransport === "rpty" ? ptyFiles({ coderUrl: handle.access.url, token: handle.access.token, agentId: handle.agent?.id ?? "" }) : (undefined as unknown as FileTransport),

    // Lost creates: the run's workspaces, found by the hashes their names carry.
    async list(config, labels, context) {
      const session = await (context.env ? createSessionCache(sessionDeps(context.env)) : sessionFor)(config);
      const workspaces = await session.api.listWorkspaces(`owner:me name:${config.workspaceName}-`, context.signal);
      return workspaces
        .filter((workspace) => !isDeleted(workspace) && nameMatchesLabels(workspace.name, config.workspaceName, labels))
        .map(
          (workspace): ListedResource => ({
            providerLeaseId: workspace.id,
            // The labels asked for are what the name proves (its hashes match them).
            labels: { ...labels },
            createdAt: workspace.created_at,
            state: workspace.latest_build.status,
            metadata: { [META.workspaceId]: workspace.id, [META.workspaceName]: workspace.name, [META.namePrefix]: config.workspaceName },
          }),
        );
    },

    // Prefixed keys: the host merges lease metadata into the config it sends, so a metadata key
    // named like a config field (workspaceName is the prefix there) would replace that field.
    leaseMetadata: (handle: Handle, config) => ({
      [META.workspaceId]: handle.workspaceId,
      [META.workspaceName]: handle.workspace.name,
      [META.namePrefix]: config.workspaceName,
      [META.owner]: handle.workspace.owner_name,
      [META.agent]: handle.agent?.name,
      ...(config.workerImage ? { [META.workerImage]: config.workerImage } : {}),
    }),
  });

  // Realization clones the run's repository when it is a GitHub one and the host has App credentials.
  const definition = kit.plugin.definition;
  const plugin = definePlugin({
    ...definition,
    async onEnvironmentRealizeWorkspace(params: PluginEnvironmentRealizeWorkspaceParams) {
      const result = await definition.onEnvironmentRealizeWorkspace!(params);
      const id = params.lease.providerLeaseId;
      const handle = id ? handles.get(id) : undefined;
      const source = sourceOf(params.workspace.metadata);
      if (handle && source) {
        const config = coderConfig.parse(params.config);
        await realizeRepository(runnerOf(handle, config), result.cwd, source, { env, githubApiUrl: deps.githubApiUrl, fetch: deps.fetch, log: (message) => ctx?.logger.info(message) });
      }
      return result;
    },
  } as Parameters<typeof definePlugin>[0]);
  return { plugin, listLeases: kit.listLeases };
}

export const createCoderPlugin = (deps: CoderPluginDeps = {}) => createCoderProvider(deps).plugin;

const provider = createCoderProvider();
/**
 * For `paperclip-sandbox leases gc --provider coder`: workspaces whose names carry the hashes of the
 * labels asked for (Coder has no labels; a listing by provider alone finds none).
 */
export const listLeases = provider.listLeases;
export default provider.plugin;
