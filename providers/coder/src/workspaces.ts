/**
 * Workspaces through Coder's control plane: create one per acquisition and wait for its build, its
 * agent and (for app-proxy) its runner app; stop and start for reuse; delete by the persisted UUID
 * without ever starting it. Builds are provisioner jobs: every change waits for its job to end, and
 * a job still running (another client's build) is waited for before the next one is asked.
 */
import { isProviderApiError, pollUntil, type SandboxHandle } from "@paperclip-sandbox/kit";
import { JOB_ACTIVE, type Workspace, type WorkspaceAgent, type WorkspaceBuild } from "./coder-api.js";
import type { CoderConfig } from "./config.js";
import type { RunnerHealth } from "./runner-protocol.js";
import type { CoderSession } from "./session.js";

export interface CoderHandle extends SandboxHandle {
  /** The workspace's immutable UUID (= providerLeaseId). */
  workspaceId: string;
  workspace: Workspace;
  /** The agent commands run on (the one serving the runner app, for app-proxy). */
  agent?: WorkspaceAgent;
  /** What the runner app offers (app-proxy only; known once the app answered). */
  runner?: RunnerHealth;
  state: "running" | "stopped";
  labels: Readonly<Record<string, string>>;
}

class WorkspaceStateError extends Error {
  override name = "WorkspaceStateError";
}

// Fast at first (an emulator, a prebuilt workspace), then no more than one call per 1.5 s while a real build runs.
const MIN_POLL_MS = 50;
const MAX_POLL_MS = 1_500;

export interface Waiting {
  signal?: AbortSignal;
  /** Injected in tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/** Polls until `done` says so, backing off from 50 ms to 1.5 s; no deadline of its own (the signal ends it). */
function poll<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, waiting: Waiting): Promise<T> {
  return pollUntil(read, done, { what, intervalMs: MIN_POLL_MS, maxIntervalMs: MAX_POLL_MS, factor: 1.4, signal: waiting.signal, sleep: waiting.sleep });
}

/** Waits for a build's provisioner job to end; returns the finished build. */
export function waitForBuild(session: CoderSession, buildId: string, waiting: Waiting): Promise<WorkspaceBuild> {
  return poll(
    `coder build ${buildId} to end`,
    () => session.api.build(buildId, waiting.signal),
    (build) => !JOB_ACTIVE.has(build.job.status),
    waiting,
  );
}

/** The workspace once no build of it is running (another client's included); null when Coder does not know it. */
export function settledWorkspace(session: CoderSession, id: string, waiting: Waiting): Promise<Workspace | null> {
  return poll(
    `coder workspace ${id} to have no build running`,
    () => session.api.workspace(id, waiting.signal),
    (workspace) => workspace === null || !JOB_ACTIVE.has(workspace.latest_build.job.status),
    waiting,
  );
}

function agentsOf(build: WorkspaceBuild): WorkspaceAgent[] {
  return build.resources.flatMap((resource) => resource.agents ?? []);
}

/** The agent to run on: the one with the runner app for app-proxy, else the first. */
export function pickAgent(workspace: Workspace, config: Pick<CoderConfig, "commandTransport" | "runnerAppSlug">): WorkspaceAgent | undefined {
  const agents = agentsOf(workspace.latest_build);
  if (config.commandTransport === "app-proxy") return agents.find((agent) => agent.apps.some((app) => app.slug === config.runnerAppSlug)) ?? agents[0];
  return agents[0];
}

/** Why a started workspace cannot serve commands (it will not get better by waiting), or undefined. */
function readinessProblem(workspace: Workspace, agent: WorkspaceAgent | undefined, config: CoderConfig): string | undefined {
  const build = workspace.latest_build;
  if (build.status === "failed" || build.status === "canceled") return `the start build ${build.status}${build.job.error ? `: ${build.job.error}` : ""}`;
  if (build.transition !== "start") return `the workspace is ${build.status} (its latest build is a ${build.transition})`;
  if (build.status !== "running") return undefined;
  if (!agent) return `template ${workspace.template_name} has no agent`;
  const blocking = (agent.startup_script_behavior ?? "blocking") === "blocking";
  if (blocking && (agent.lifecycle_state === "start_error" || agent.lifecycle_state === "start_timeout")) {
    return `the agent's startup script ended in ${agent.lifecycle_state}`;
  }
  if (config.commandTransport === "app-proxy") {
    const app = agent.apps.find((each) => each.slug === config.runnerAppSlug);
    if (!app) return `template ${workspace.template_name} has no app ${config.runnerAppSlug} on agent ${agent.name} (see the README's template setup, or set Runner app slug)`;
    if (app.subdomain) return `app ${config.runnerAppSlug} is a subdomain app; the runner must be a path app (subdomain = false)`;
  }
  return undefined;
}

function isReady(workspace: Workspace, agent: WorkspaceAgent | undefined, config: CoderConfig): boolean {
  if (workspace.latest_build.status !== "running" || !agent || agent.status !== "connected") return false;
  const lifecycleOk = agent.lifecycle_state === "ready" || ((agent.startup_script_behavior ?? "blocking") === "non-blocking" && agent.lifecycle_state !== "created");
  if (!lifecycleOk) return false;
  if (config.commandTransport !== "app-proxy") return true;
  const app = agent.apps.find((each) => each.slug === config.runnerAppSlug);
  return app !== undefined && (app.health === "healthy" || app.health === "disabled");
}

/** Waits until the workspace runs with a connected, ready agent (and a healthy runner app); throws what will not clear up. */
export async function waitReady(session: CoderSession, id: string, config: CoderConfig, waiting: Waiting): Promise<{ workspace: Workspace; agent: WorkspaceAgent }> {
  let problem: string | undefined;
  const workspace = await poll(
    `coder workspace ${id} to be ready`,
    () => session.api.workspace(id, waiting.signal),
    (current) => {
      if (!current) {
        problem = "Coder no longer knows the workspace";
        return true;
      }
      const agent = pickAgent(current, config);
      problem = readinessProblem(current, agent, config);
      return problem !== undefined || isReady(current, agent, config);
    },
    waiting,
  );
  if (problem || !workspace) throw new WorkspaceStateError(`coder workspace ${workspace?.name ?? id} is not usable: ${problem}`);
  return { workspace, agent: pickAgent(workspace, config)! };
}

/** Deleted, as far as cleanup is concerned: Coder has it deleted, or is deleting it successfully. */
export function isDeleted(workspace: Workspace): boolean {
  const build = workspace.latest_build;
  return build.transition === "delete" && build.job.status === "succeeded";
}

export interface DeleteExpectation {
  /** Checks the workspace before anything is done to it (name, owner); throws to refuse. */
  authorize(workspace: Workspace): void;
}

/**
 * Deletes a workspace by UUID: waits out a running build, asks for a delete build (again after a
 * 409) and waits for its job. A workspace whose latest build is already a finished delete is done.
 * Never starts anything.
 */
export async function deleteWorkspace(session: CoderSession, id: string, expectation: DeleteExpectation, waiting: Waiting): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const workspace = await settledWorkspace(session, id, waiting);
    if (!workspace) throw new WorkspaceStateError(`coder workspace ${id}: Coder does not know it (or hides it from this token); refusing to report it deleted`);
    expectation.authorize(workspace);
    if (isDeleted(workspace)) return;
    let build: WorkspaceBuild;
    try {
      build = await session.api.createBuild(id, { transition: "delete" }, waiting.signal);
    } catch (error) {
      // Another client's build began meanwhile: wait for it, then ask again.
      if (isProviderApiError(error) && error.status === 409) continue;
      // Deleted meanwhile (410 without include_deleted): the next round sees it.
      if (isProviderApiError(error) && error.status === 410) continue;
      throw error;
    }
    const done = await waitForBuild(session, build.id, waiting);
    if (done.job.status === "succeeded") return;
    throw new WorkspaceStateError(`coder workspace ${workspace.name}: the delete build ${done.job.status}${done.job.error ? `: ${done.job.error}` : ""}`);
  }
  throw new WorkspaceStateError(`coder workspace ${id}: other builds kept it busy; the delete was not asked`);
}

/** Stops a running workspace (its disk stays); confirmed once the stop build succeeded. */
export async function stopWorkspace(session: CoderSession, id: string, expectation: DeleteExpectation, waiting: Waiting): Promise<void> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const workspace = await settledWorkspace(session, id, waiting);
    if (!workspace || isDeleted(workspace)) throw new WorkspaceStateError(`coder workspace ${id} is gone; nothing to keep`);
    expectation.authorize(workspace);
    if (workspace.latest_build.status === "stopped") return;
    let build: WorkspaceBuild;
    try {
      build = await session.api.createBuild(id, { transition: "stop" }, waiting.signal);
    } catch (error) {
      if (isProviderApiError(error) && error.status === 409) continue;
      throw error;
    }
    const done = await waitForBuild(session, build.id, waiting);
    if (done.job.status === "succeeded") return;
    throw new WorkspaceStateError(`coder workspace ${workspace.name}: the stop build ${done.job.status}${done.job.error ? `: ${done.job.error}` : ""}`);
  }
  throw new WorkspaceStateError(`coder workspace ${id}: other builds kept it busy; the stop was not asked`);
}

/** Starts a stopped workspace with the config's parameter values; returns once it is ready. */
export async function startWorkspace(
  session: CoderSession,
  id: string,
  config: CoderConfig,
  expectation: DeleteExpectation,
  waiting: Waiting,
): Promise<{ workspace: Workspace; agent: WorkspaceAgent }> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const workspace = await settledWorkspace(session, id, waiting);
    if (!workspace || isDeleted(workspace)) throw new WorkspaceStateError(`coder workspace ${id} is gone`);
    expectation.authorize(workspace);
    if (workspace.latest_build.status !== "running") {
      try {
        const parameters = Object.entries(config.workspaceParameters).map(([name, value]) => ({ name, value }));
        const build = await session.api.createBuild(id, { transition: "start", ...(parameters.length > 0 ? { rich_parameter_values: parameters } : {}) }, waiting.signal);
        const done = await waitForBuild(session, build.id, waiting);
        if (done.job.status !== "succeeded") throw new WorkspaceStateError(`coder workspace ${workspace.name}: the start build ${done.job.status}${done.job.error ? `: ${done.job.error}` : ""}`);
      } catch (error) {
        if (isProviderApiError(error) && error.status === 409) continue;
        throw error;
      }
    }
    return waitReady(session, id, config, waiting);
  }
  throw new WorkspaceStateError(`coder workspace ${id}: other builds kept it busy; the start was not asked`);
}
