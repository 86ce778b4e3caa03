/**
 * One Coder deployment: a user, an organization, templates, and workspaces whose builds run as
 * provisioner jobs (pending → running → succeeded | failed | canceled). A start build runs the
 * workspace as a jail (home /home/coder) with an agent in it; a stop build stops the jail (disk
 * kept); a delete build destroys it and marks the workspace deleted. One build at a time.
 */
import { randomUUID } from "node:crypto";
import type { Sandbox, SandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { runAgent, type AgentRuntime } from "./agent.js";
import { coderError, notFound } from "./errors.js";
import {
  ACTIVE_JOB,
  buildStatus,
  latestBuild,
  type AgentRecord,
  type BuildRecord,
  type OrganizationRecord,
  type TemplateRecord,
  type Transition,
  type UserRecord,
  type Views,
  type WorkspaceRecord,
} from "./model.js";
import type { ResolvedOptions, TemplateSpec } from "./options.js";
import { resolveParameters, type BuildParameter } from "./parameters.js";
import { WorkspaceAgentPool } from "./workspace-net.js";

/** The workspace user's name inside every workspace (Coder's images run as `coder`). */
export const WORKSPACE_USER = "coder";
export const WORKSPACE_HOME = "/home/coder";
const WORKSPACE_NAME = /^[a-zA-Z0-9]+(?:-[a-zA-Z0-9]+)*$/;

export interface CreateWorkspaceInput {
  name: unknown;
  templateId?: unknown;
  templateVersionId?: unknown;
  parameters: unknown;
  ttlMs?: unknown;
  autostartSchedule?: unknown;
  automaticUpdates?: unknown;
}

export interface BuildInput {
  transition: unknown;
  templateVersionId?: unknown;
  parameters?: unknown;
  orphan?: unknown;
  reason?: "initiator" | "autostop";
}

/** Test hooks: failures a real deployment produces that a test cannot cause through the API. */
export interface DeploymentControl {
  /** The next `times` jobs of this transition fail with `error` (Terraform's message). */
  failNext(transition: Transition, error?: string, times?: number): void;
  /** Every workspace, deleted ones included. */
  workspaces(): Array<{ id: string; name: string; deleted: boolean; status: string; builds: number }>;
  /** The jail of a workspace, while it exists. */
  sandbox(workspaceId: string): Sandbox | undefined;
}

interface Runtime {
  sandbox?: Sandbox;
  pool?: WorkspaceAgentPool;
  agent?: AgentRuntime;
}

export class Deployment {
  readonly user: UserRecord;
  readonly organization: OrganizationRecord;
  readonly templates: TemplateRecord[];
  readonly views: Views;
  private readonly workspaces = new Map<string, WorkspaceRecord>();
  private readonly runtimes = new Map<string, Runtime>();
  private readonly failures: Array<{ transition: Transition; error: string; times: number }> = [];
  private readonly jobs = new Set<Promise<void>>();
  /** Real epoch ms each workspace was created at: `maxLifetimeMs` is a real bound, not a vendor duration. */
  private readonly bornAt = new Map<string, number>();
  private closed = false;

  /** The vendor clock's instant as Coder prints it. */
  private now(): string {
    return new Date(this.options.clock.now()).toISOString();
  }

  constructor(
    private readonly backend: SandboxBackend,
    private readonly options: ResolvedOptions,
    origin: () => string,
  ) {
    const created = this.now();
    this.user = { id: randomUUID(), username: options.username, email: `${options.username}@coder.example`, createdAt: created };
    this.organization = { id: randomUUID(), name: options.organization, createdAt: created };
    this.templates = options.templates.map((spec) => ({
      id: randomUUID(),
      organizationId: this.organization.id,
      activeVersionId: randomUUID(),
      activeVersionName: "emulated-v1",
      createdAt: created,
      spec,
    }));
    const self = this;
    this.views = {
      get origin() {
        return origin();
      },
      user: (id) => {
        if (id !== self.user.id) throw notFound();
        return self.user;
      },
      organization: (id) => {
        if (id !== self.organization.id) throw notFound();
        return self.organization;
      },
      template: (id) => {
        const template = self.templates.find((each) => each.id === id);
        if (!template) throw notFound();
        return template;
      },
    };
  }

  readonly control: DeploymentControl = {
    failNext: (transition, error = "terraform apply: emulated provisioning failure", times = 1) => void this.failures.push({ transition, error, times }),
    workspaces: () => [...this.workspaces.values()].map((w) => ({ id: w.id, name: w.name, deleted: w.deleted, status: buildStatus(latestBuild(w)), builds: w.builds.length })),
    sandbox: (id) => this.runtimes.get(id)?.sandbox,
  };

  /** `me`, the username or the id; anyone else is not visible. */
  requireUser(ref: string): UserRecord {
    if (ref === "me" || ref === this.user.username || ref === this.user.id) return this.user;
    throw notFound();
  }

  requireOrganization(ref: string): OrganizationRecord {
    if (ref === this.organization.id || ref === this.organization.name || ref === "default") return this.organization;
    throw notFound();
  }

  templateByName(name: string): TemplateRecord {
    const template = this.templates.find((each) => each.spec.name.toLowerCase() === name.toLowerCase());
    if (!template) throw notFound();
    return template;
  }

  templateByVersion(versionId: string): TemplateRecord {
    const template = this.templates.find((each) => each.activeVersionId === versionId);
    if (!template) throw notFound();
    return template;
  }

  /** A workspace by id; a deleted one only when asked for (else 410, as Coder answers). */
  workspace(id: string, includeDeleted = false): WorkspaceRecord {
    const workspace = this.workspaces.get(id);
    if (!workspace) throw notFound();
    if (workspace.deleted && !includeDeleted) {
      throw coderError(410, `Workspace ${JSON.stringify(workspace.id)} was deleted, you can view this workspace by specifying '?deleted=true' and trying again.`);
    }
    return workspace;
  }

  workspaceByName(name: string, includeDeleted: boolean): WorkspaceRecord {
    const matches = [...this.workspaces.values()].filter((each) => each.name === name && (includeDeleted || !each.deleted));
    // A name can be reused after a delete: the live one wins, else the latest deleted one.
    const workspace = matches.find((each) => !each.deleted) ?? matches[matches.length - 1];
    if (!workspace) throw notFound();
    return workspace;
  }

  allWorkspaces(): WorkspaceRecord[] {
    return [...this.workspaces.values()];
  }

  build(id: string): { build: BuildRecord; workspace: WorkspaceRecord } {
    for (const workspace of this.workspaces.values()) {
      const build = workspace.builds.find((each) => each.id === id);
      if (build) return { build, workspace };
    }
    throw notFound();
  }

  agent(id: string): { agent: AgentRecord; workspace: WorkspaceRecord; build: BuildRecord } {
    for (const workspace of this.workspaces.values()) {
      for (const build of workspace.builds) if (build.agent?.id === id) return { agent: build.agent, workspace, build };
    }
    throw notFound();
  }

  /** The running jail of a workspace and its tunnel pool, when its latest build is a finished start. */
  live(workspace: WorkspaceRecord): { sandbox: Sandbox; pool: WorkspaceAgentPool } | undefined {
    const runtime = this.runtimes.get(workspace.id);
    const latest = latestBuild(workspace);
    if (!runtime?.sandbox || !runtime.pool || workspace.deleted || buildStatus(latest) !== "running" || runtime.sandbox.state !== "running") return undefined;
    return { sandbox: runtime.sandbox, pool: runtime.pool };
  }

  createWorkspace(input: CreateWorkspaceInput): WorkspaceRecord {
    if (this.closed) throw coderError(503, "The emulator is shutting down.");
    const name = input.name;
    if (typeof name !== "string" || name.length > 32 || !WORKSPACE_NAME.test(name) || name === "new" || name === "create") {
      throw coderError(400, "Validation failed.", { validations: [{ field: "name", detail: `Validation failed for tag "workspace_name" with value: "${String(name)}"` }] });
    }
    if ([...this.workspaces.values()].some((each) => each.name === name && !each.deleted)) {
      throw coderError(409, `Workspace by name ${JSON.stringify(name)} already exists.`, { validations: [{ field: "name", detail: "This value is already in use and should be unique." }] });
    }
    if ((input.templateId === undefined) === (input.templateVersionId === undefined)) {
      throw coderError(400, "Validation failed.", { validations: [{ field: "template_id", detail: "exactly one of template_id and template_version_id must be set" }] });
    }
    const template =
      typeof input.templateId === "string" ? this.templates.find((each) => each.id === input.templateId) : this.templates.find((each) => each.activeVersionId === input.templateVersionId);
    if (!template) throw coderError(400, `Template by ID ${JSON.stringify(input.templateId ?? input.templateVersionId)} not found.`);
    const parameters = resolveParameters(template.spec.parameters ?? [], parseParameters(input.parameters), undefined);
    // `validWorkspaceTTLMillis`: truncated to whole minutes, from one minute to 30 days.
    let ttlMs: number | null = null;
    if (input.ttlMs !== undefined && input.ttlMs !== null && input.ttlMs !== 0) {
      if (typeof input.ttlMs !== "number" || !Number.isInteger(input.ttlMs))
        throw coderError(400, "Invalid Workspace Time to Shutdown.", { validations: [{ field: "ttl_ms", detail: "must be an integer" }] });
      ttlMs = Math.floor(input.ttlMs / 60_000) * 60_000;
      if (ttlMs < 60_000) throw coderError(400, "Invalid Workspace Time to Shutdown.", { validations: [{ field: "ttl_ms", detail: "time until shutdown must be at least one minute" }] });
      if (ttlMs > 30 * 24 * 3_600_000) throw coderError(400, "Invalid Workspace Time to Shutdown.", { validations: [{ field: "ttl_ms", detail: "time until shutdown must be less than 30 days" }] });
    }
    const created = this.now();
    const workspace: WorkspaceRecord = {
      id: randomUUID(),
      name,
      ownerId: this.user.id,
      organizationId: this.organization.id,
      templateId: template.id,
      createdAt: created,
      updatedAt: created,
      lastUsedAt: created,
      ttlMs,
      autostartSchedule: typeof input.autostartSchedule === "string" ? input.autostartSchedule : null,
      automaticUpdates: input.automaticUpdates === "always" ? "always" : "never",
      deleted: false,
      builds: [],
    };
    this.workspaces.set(workspace.id, workspace);
    this.bornAt.set(workspace.id, Date.now());
    this.enqueue(workspace, "start", parameters, template, "initiator");
    return workspace;
  }

  createBuild(workspace: WorkspaceRecord, input: BuildInput): BuildRecord {
    if (this.closed) throw coderError(503, "The emulator is shutting down.");
    const transition = input.transition;
    if (transition !== "start" && transition !== "stop" && transition !== "delete") {
      throw coderError(400, "Validation failed.", { validations: [{ field: "transition", detail: `Validation failed for tag "oneof" with value: "${String(transition)}"` }] });
    }
    const latest = latestBuild(workspace);
    if (ACTIVE_JOB.has(latest.job.status)) throw coderError(409, "A workspace build is already active.");
    const template = this.views.template(workspace.templateId);
    if (input.templateVersionId !== undefined && input.templateVersionId !== template.activeVersionId) throw coderError(400, "Template version not found.");
    const previous = lastParameters(workspace);
    const parameters = transition === "start" ? resolveParameters(template.spec.parameters ?? [], parseParameters(input.parameters ?? []), previous) : previous;
    return this.enqueue(workspace, transition, parameters, template, input.reason ?? "initiator");
  }

  /** `putExtendWorkspace`: moves the running build's deadline (at least 29 minutes ahead, after the build started). */
  extend(workspace: WorkspaceRecord, deadline: unknown): void {
    const latest = latestBuild(workspace);
    if (buildStatus(latest) !== "running" || !latest.deadline) throw coderError(400, "Workspace must be started, cannot extend.");
    const at = typeof deadline === "string" ? Date.parse(deadline) : Number.NaN;
    if (!Number.isFinite(at)) throw coderError(400, "Validation failed.", { validations: [{ field: "deadline", detail: "must be a date-time" }] });
    if (at < this.options.clock.now() + this.options.clock.duration(29 * 60_000)) throw coderError(400, "Cannot extend workspace: new deadline must be at least 30 minutes in the future");
    if (at < Date.parse(latest.job.startedAt ?? latest.createdAt)) throw coderError(400, "Cannot extend workspace: new deadline is before workspace start time");
    latest.deadline = new Date(at).toISOString();
    this.touch(workspace, latest);
  }

  cancel(build: BuildRecord, workspace: WorkspaceRecord): void {
    if (!ACTIVE_JOB.has(build.job.status) || build !== latestBuild(workspace)) throw coderError(400, "Job has already completed!");
    if (build.job.status === "pending") {
      build.job.status = "canceled";
      build.job.canceledAt = this.now();
      build.job.completedAt = this.now();
    } else build.job.status = "canceling";
    this.touch(workspace, build);
  }

  private enqueue(workspace: WorkspaceRecord, transition: Transition, parameters: BuildParameter[], template: TemplateRecord, reason: BuildRecord["reason"]): BuildRecord {
    const created = this.now();
    const build: BuildRecord = {
      id: randomUUID(),
      workspaceId: workspace.id,
      number: workspace.builds.length + 1,
      transition,
      reason,
      createdAt: created,
      updatedAt: created,
      templateVersionId: template.activeVersionId,
      templateVersionName: template.activeVersionName,
      job: { id: randomUUID(), status: "pending", createdAt: created },
      parameters,
    };
    workspace.builds.push(build);
    workspace.updatedAt = created;
    const job = this.runJob(workspace, build, template.spec).finally(() => this.jobs.delete(job));
    this.jobs.add(job);
    return build;
  }

  private touch(workspace: WorkspaceRecord, build?: BuildRecord): void {
    const at = this.now();
    workspace.updatedAt = at;
    if (build) build.updatedAt = at;
  }

  private takeFailure(transition: Transition): string | undefined {
    const failure = this.failures.find((each) => each.transition === transition && each.times > 0);
    if (!failure) return undefined;
    failure.times -= 1;
    return failure.error;
  }

  private async runJob(workspace: WorkspaceRecord, build: BuildRecord, spec: TemplateSpec): Promise<void> {
    await this.options.clock.sleep(this.options.jobQueueMs);
    if (build.job.status !== "pending") return; // canceled while queued
    build.job.status = "running";
    build.job.startedAt = this.now();
    this.touch(workspace, build);
    try {
      await this.options.clock.sleep(this.options.jobRunMs);
      if ((build.job.status as string) === "canceling") {
        build.job.status = "canceled";
        build.job.canceledAt = build.job.completedAt = this.now();
        this.touch(workspace, build);
        return;
      }
      const failure = this.takeFailure(build.transition);
      if (failure) throw new Error(failure);
      if (build.transition === "start") await this.start(workspace, build, spec);
      else if (build.transition === "stop") await this.stop(workspace);
      else await this.remove(workspace);
      build.job.status = "succeeded";
      build.job.completedAt = this.now();
      if (build.transition === "start" && workspace.ttlMs !== null) build.deadline = new Date(this.options.clock.now() + this.options.clock.duration(workspace.ttlMs)).toISOString();
      if (build.transition === "delete") workspace.deleted = true;
      this.touch(workspace, build);
      if (build.transition === "start") this.startAgent(workspace, build, spec);
    } catch (error) {
      build.job.status = "failed";
      build.job.error = error instanceof Error ? error.message : String(error);
      build.job.completedAt = this.now();
      this.touch(workspace, build);
    }
  }

  private runtime(workspace: WorkspaceRecord): Runtime {
    let runtime = this.runtimes.get(workspace.id);
    if (!runtime) {
      runtime = {};
      this.runtimes.set(workspace.id, runtime);
    }
    return runtime;
  }

  /** The start build's work: the workspace's jail running (created the first time, started again after a stop). */
  private async start(workspace: WorkspaceRecord, build: BuildRecord, spec: TemplateSpec): Promise<void> {
    const runtime = this.runtime(workspace);
    const agentSpec = spec.agent ?? {};
    const env = {
      CODER: "true",
      CODER_WORKSPACE_NAME: workspace.name,
      CODER_WORKSPACE_OWNER_NAME: this.user.username,
      CODER_WORKSPACE_AGENT_NAME: agentSpec.name ?? "main",
      ...(agentSpec.env ?? {}),
    };
    if (runtime.sandbox && runtime.sandbox.state !== "destroyed") {
      if (runtime.sandbox.state !== "running") await runtime.sandbox.start();
    } else {
      runtime.sandbox = await this.backend.create({
        id: workspace.id,
        user: { name: WORKSPACE_USER, home: WORKSPACE_HOME },
        env,
        expiresAt: (this.bornAt.get(workspace.id) ?? Date.now()) + this.options.maxLifetimeMs,
        labels: { "coder-workspace": workspace.id },
      });
    }
    runtime.pool?.destroy();
    runtime.pool = new WorkspaceAgentPool(runtime.sandbox);
    const resourceId = randomUUID();
    build.resourceId = resourceId;
    build.agent = {
      id: randomUUID(),
      resourceId,
      name: agentSpec.name ?? "main",
      createdAt: this.now(),
      status: "connecting",
      lifecycle: "created",
      directory: agentSpec.directory ?? WORKSPACE_HOME,
      env,
      startupScriptBehavior: agentSpec.startupScriptBehavior ?? "blocking",
      apps: (agentSpec.apps ?? []).map((app) => ({ id: randomUUID(), spec: app, health: app.healthcheck?.url ? "initializing" : "disabled", failures: 0 })),
    };
  }

  private startAgent(workspace: WorkspaceRecord, build: BuildRecord, spec: TemplateSpec): void {
    const runtime = this.runtime(workspace);
    if (!build.agent || !runtime.sandbox || !runtime.pool) return;
    runtime.agent?.stop();
    runtime.agent = runAgent(build.agent, spec.agent ?? {}, runtime.sandbox, runtime.pool, this.options, () => this.touch(workspace));
  }

  private endAgent(workspace: WorkspaceRecord, lifecycle: "off"): void {
    const runtime = this.runtimes.get(workspace.id);
    runtime?.agent?.stop();
    if (runtime) runtime.agent = undefined;
    runtime?.pool?.destroy();
    if (runtime) runtime.pool = undefined;
    const agent = [...workspace.builds].reverse().find((each) => each.agent)?.agent;
    if (agent) {
      agent.lifecycle = lifecycle;
      agent.status = "disconnected";
      agent.disconnectedAt = this.now();
    }
  }

  private async stop(workspace: WorkspaceRecord): Promise<void> {
    this.endAgent(workspace, "off");
    await this.runtimes.get(workspace.id)?.sandbox?.stop();
  }

  private async remove(workspace: WorkspaceRecord): Promise<void> {
    this.endAgent(workspace, "off");
    await this.backend.destroy(workspace.id);
    const runtime = this.runtimes.get(workspace.id);
    if (runtime) runtime.sandbox = undefined;
  }

  /** Autostop at a start build's deadline; delete past the emulator's lifetime bound. */
  sweep(): void {
    if (this.closed) return;
    const at = this.options.clock.now();
    const real = Date.now();
    for (const workspace of this.workspaces.values()) {
      if (workspace.deleted) continue;
      const latest = latestBuild(workspace);
      if (ACTIVE_JOB.has(latest.job.status)) continue;
      try {
        if (real - (this.bornAt.get(workspace.id) ?? real) >= this.options.maxLifetimeMs) this.createBuild(workspace, { transition: "delete" });
        else if (buildStatus(latest) === "running" && latest.deadline && at >= Date.parse(latest.deadline)) this.createBuild(workspace, { transition: "stop", reason: "autostop" });
      } catch {
        // Busy: the next sweep tries again.
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.jobs]);
    for (const [id, runtime] of this.runtimes) {
      runtime.agent?.stop();
      runtime.pool?.destroy();
      await this.backend.destroy(id).catch(() => undefined);
    }
    this.runtimes.clear();
  }

  async leftovers(): Promise<string[]> {
    const live = [...this.workspaces.values()].filter((w) => !w.deleted).map((w) => `workspace ${w.name} ${w.id} (${buildStatus(latestBuild(w))})`);
    const jails = (await this.backend.list()).map((jail) => `jail ${jail.id} (${jail.state})`);
    return [...live, ...jails];
  }
}

function lastParameters(workspace: WorkspaceRecord): BuildParameter[] {
  return workspace.builds.length > 0 ? latestBuild(workspace).parameters : [];
}

function parseParameters(value: unknown): BuildParameter[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((item) => item && typeof item === "object" && typeof item.name === "string" && typeof item.value === "string")) {
    throw coderError(400, "Validation failed.", { validations: [{ field: "rich_parameter_values", detail: "must be a list of {name, value} strings" }] });
  }
  return value.map((item: { name: string; value: string }) => ({ name: item.name, value: item.value }));
}
