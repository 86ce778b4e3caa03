/**
 * The records behind the API and their JSON as `codersdk` writes it (Workspace, WorkspaceBuild,
 * ProvisionerJob, WorkspaceResource, WorkspaceAgent, WorkspaceApp, Template, TemplateVersion,
 * TemplateVersionParameter, User, Organization). Field names and enums follow
 * `site/src/api/typesGenerated.ts` and the Go structs of `codersdk`.
 */
import type { AppSpec, ParameterSpec, TemplateSpec } from "./options.js";

export type Transition = "start" | "stop" | "delete";
export type JobStatus = "pending" | "running" | "succeeded" | "canceling" | "canceled" | "failed";
type AgentStatus = "connecting" | "connected" | "disconnected" | "timeout";
type AgentLifecycle = "created" | "starting" | "start_timeout" | "start_error" | "ready" | "shutting_down" | "shutdown_timeout" | "shutdown_error" | "off";
type AppHealth = "disabled" | "initializing" | "healthy" | "unhealthy";

export interface UserRecord {
  id: string;
  username: string;
  email: string;
  createdAt: string;
}

export interface OrganizationRecord {
  id: string;
  name: string;
  createdAt: string;
}

export interface TemplateRecord {
  id: string;
  organizationId: string;
  activeVersionId: string;
  activeVersionName: string;
  createdAt: string;
  spec: TemplateSpec;
}

export interface JobRecord {
  id: string;
  status: JobStatus;
  createdAt: string;
  startedAt?: string;
  completedAt?: string;
  canceledAt?: string;
  error?: string;
}

export interface AppRecord {
  id: string;
  spec: AppSpec;
  health: AppHealth;
  /** Failed checks in a row, counted up to the threshold (the failure after that makes it unhealthy). */
  failures: number;
}

export interface AgentRecord {
  id: string;
  resourceId: string;
  name: string;
  createdAt: string;
  status: AgentStatus;
  lifecycle: AgentLifecycle;
  firstConnectedAt?: string;
  lastConnectedAt?: string;
  disconnectedAt?: string;
  startedAt?: string;
  readyAt?: string;
  directory: string;
  env: Record<string, string>;
  startupScriptBehavior: "blocking" | "non-blocking";
  apps: AppRecord[];
}

export interface BuildRecord {
  id: string;
  workspaceId: string;
  number: number;
  transition: Transition;
  reason: "initiator" | "autostart" | "autostop";
  createdAt: string;
  updatedAt: string;
  templateVersionId: string;
  templateVersionName: string;
  job: JobRecord;
  parameters: Array<{ name: string; value: string }>;
  /** The start build's resource and agent (stop and delete builds have none). */
  agent?: AgentRecord;
  resourceId?: string;
  deadline?: string;
}

export interface WorkspaceRecord {
  id: string;
  name: string;
  ownerId: string;
  organizationId: string;
  templateId: string;
  createdAt: string;
  updatedAt: string;
  lastUsedAt: string;
  ttlMs: number | null;
  autostartSchedule: string | null;
  automaticUpdates: "always" | "never";
  deleted: boolean;
  builds: BuildRecord[];
}

export const ACTIVE_JOB = new Set<JobStatus>(["pending", "running", "canceling"]);

export function latestBuild(workspace: WorkspaceRecord): BuildRecord {
  return workspace.builds[workspace.builds.length - 1]!;
}

/** `convertWorkspaceStatus`: the workspace status from its latest build's job and transition. */
export function buildStatus(build: BuildRecord): string {
  switch (build.job.status) {
    case "pending":
      return "pending";
    case "running":
      return build.transition === "start" ? "starting" : build.transition === "stop" ? "stopping" : "deleting";
    case "succeeded":
      return build.transition === "start" ? "running" : build.transition === "stop" ? "stopped" : "deleted";
    case "canceling":
      return "canceling";
    case "canceled":
      return "canceled";
    default:
      return "failed";
  }
}

export interface Views {
  origin: string;
  user(id: string): UserRecord;
  organization(id: string): OrganizationRecord;
  template(id: string): TemplateRecord;
}

export function userJson(user: UserRecord, organizationIds: string[]) {
  return {
    id: user.id,
    username: user.username,
    name: "",
    email: user.email,
    created_at: user.createdAt,
    updated_at: user.createdAt,
    last_seen_at: new Date().toISOString(),
    status: "active",
    login_type: "password",
    theme_preference: "",
    organization_ids: organizationIds,
    roles: [{ name: "member", display_name: "Member" }],
    avatar_url: "",
  };
}

export function organizationJson(org: OrganizationRecord) {
  return {
    id: org.id,
    name: org.name,
    display_name: org.name,
    description: "",
    icon: "",
    created_at: org.createdAt,
    updated_at: org.createdAt,
    is_default: true,
  };
}

export function templateJson(template: TemplateRecord, views: Views) {
  const org = views.organization(template.organizationId);
  return {
    id: template.id,
    created_at: template.createdAt,
    updated_at: template.createdAt,
    organization_id: template.organizationId,
    organization_name: org.name,
    organization_display_name: org.name,
    organization_icon: "",
    name: template.spec.name,
    display_name: template.spec.displayName ?? "",
    provisioner: "terraform",
    active_version_id: template.activeVersionId,
    active_user_count: 0,
    build_time_stats: { start: {}, stop: {}, delete: {} },
    description: template.spec.description ?? "",
    deprecated: false,
    deprecation_message: "",
    icon: "",
    default_ttl_ms: 0,
    activity_bump_ms: 3_600_000,
    autostop_requirement: { days_of_week: [], weeks: 1 },
    autostart_requirement: { days_of_week: ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"] },
    created_by_id: template.organizationId,
    created_by_name: "admin",
    allow_user_autostart: true,
    allow_user_autostop: true,
    allow_user_cancel_workspace_jobs: true,
    failure_ttl_ms: 0,
    time_til_dormant_ms: 0,
    time_til_dormant_autodelete_ms: 0,
    require_active_version: false,
    max_port_share_level: "owner",
    use_classic_parameter_flow: true,
  };
}

export function templateVersionJson(template: TemplateRecord, views: Views) {
  return {
    id: template.activeVersionId,
    template_id: template.id,
    organization_id: template.organizationId,
    created_at: template.createdAt,
    updated_at: template.createdAt,
    name: template.activeVersionName,
    message: "",
    job: jobJson({ id: template.activeVersionId, status: "succeeded", createdAt: template.createdAt, startedAt: template.createdAt, completedAt: template.createdAt }),
    readme: "",
    created_by: { id: views.organization(template.organizationId).id, username: "admin", avatar_url: "" },
    archived: false,
    warnings: [],
  };
}

export function parameterJson(parameter: ParameterSpec) {
  return {
    name: parameter.name,
    display_name: parameter.displayName ?? "",
    description: parameter.description ?? "",
    description_plaintext: parameter.description ?? "",
    type: parameter.type ?? "string",
    form_type: "",
    mutable: parameter.mutable ?? false,
    default_value: parameter.defaultValue ?? "",
    icon: "",
    options: (parameter.options ?? []).map((option) => ({ name: option.name, description: option.description ?? "", value: option.value, icon: "" })),
    ...(parameter.validationError !== undefined ? { validation_error: parameter.validationError } : {}),
    ...(parameter.validationRegex !== undefined ? { validation_regex: parameter.validationRegex } : {}),
    ...(parameter.validationMin !== undefined ? { validation_min: parameter.validationMin } : {}),
    ...(parameter.validationMax !== undefined ? { validation_max: parameter.validationMax } : {}),
    required: parameter.required ?? false,
    ephemeral: parameter.ephemeral ?? false,
  };
}

function jobJson(job: JobRecord) {
  return {
    id: job.id,
    created_at: job.createdAt,
    ...(job.startedAt ? { started_at: job.startedAt } : {}),
    ...(job.completedAt ? { completed_at: job.completedAt } : {}),
    ...(job.canceledAt ? { canceled_at: job.canceledAt } : {}),
    ...(job.error ? { error: job.error } : {}),
    status: job.status,
    file_id: "00000000-0000-0000-0000-000000000000",
    tags: { scope: "organization", owner: "" },
    queue_position: job.status === "pending" ? 1 : 0,
    queue_size: job.status === "pending" ? 1 : 0,
    organization_id: "",
    type: "workspace_build",
  };
}

function appJson(app: AppRecord, agentName: string) {
  return {
    id: app.id,
    url: app.spec.url,
    external: false,
    slug: app.spec.slug,
    display_name: app.spec.displayName ?? app.spec.slug,
    icon: "",
    subdomain: app.spec.subdomain ?? false,
    ...(app.spec.subdomain ? { subdomain_name: `${app.spec.slug}--${agentName}` } : {}),
    sharing_level: app.spec.share ?? "owner",
    healthcheck: app.spec.healthcheck ?? { url: "", interval: 0, threshold: 0 },
    health: app.health,
    hidden: false,
    open_in: "slim-window",
    statuses: [],
  };
}

export function agentJson(agent: AgentRecord) {
  return {
    id: agent.id,
    parent_id: null,
    created_at: agent.createdAt,
    updated_at: agent.lastConnectedAt ?? agent.createdAt,
    ...(agent.firstConnectedAt ? { first_connected_at: agent.firstConnectedAt } : {}),
    ...(agent.lastConnectedAt ? { last_connected_at: agent.lastConnectedAt } : {}),
    ...(agent.disconnectedAt ? { disconnected_at: agent.disconnectedAt } : {}),
    ...(agent.startedAt ? { started_at: agent.startedAt } : {}),
    ...(agent.readyAt ? { ready_at: agent.readyAt } : {}),
    status: agent.status,
    lifecycle_state: agent.lifecycle,
    name: agent.name,
    resource_id: agent.resourceId,
    architecture: process.arch === "x64" ? "amd64" : process.arch,
    environment_variables: agent.env,
    operating_system: "linux",
    logs_length: 0,
    logs_overflowed: false,
    directory: agent.directory,
    expanded_directory: agent.directory,
    version: "v2.24.1",
    api_version: "2.4",
    apps: agent.apps.map((app) => appJson(app, agent.name)),
    connection_timeout_seconds: 120,
    troubleshooting_url: "",
    subsystems: [],
    health: agent.status === "connected" ? { healthy: true } : { healthy: false, reason: `agent is ${agent.status}` },
    display_apps: ["web_terminal"],
    log_sources: [],
    scripts: [],
    startup_script_behavior: agent.startupScriptBehavior,
  };
}

export function buildJson(build: BuildRecord, workspace: WorkspaceRecord, views: Views) {
  const owner = views.user(workspace.ownerId);
  return {
    id: build.id,
    created_at: build.createdAt,
    updated_at: build.updatedAt,
    workspace_id: workspace.id,
    workspace_name: workspace.name,
    workspace_owner_id: owner.id,
    workspace_owner_name: owner.username,
    workspace_owner_avatar_url: "",
    template_version_id: build.templateVersionId,
    template_version_name: build.templateVersionName,
    build_number: build.number,
    transition: build.transition,
    initiator_id: owner.id,
    initiator_name: owner.username,
    job: jobJson(build.job),
    reason: build.reason,
    resources:
      build.agent && build.resourceId
        ? [
            {
              id: build.resourceId,
              created_at: build.createdAt,
              job_id: build.job.id,
              workspace_transition: build.transition,
              type: "docker_container",
              name: "workspace",
              hide: false,
              icon: "",
              agents: [agentJson(build.agent)],
              metadata: [],
              daily_cost: 0,
            },
          ]
        : [],
    ...(build.deadline ? { deadline: build.deadline } : {}),
    status: buildStatus(build),
    daily_cost: 0,
    matched_provisioners: { count: 1, available: 1 },
    template_version_preset_id: null,
  };
}

export function workspaceJson(workspace: WorkspaceRecord, views: Views) {
  const owner = views.user(workspace.ownerId);
  const org = views.organization(workspace.organizationId);
  const template = views.template(workspace.templateId);
  const latest = latestBuild(workspace);
  const failing = latest.agent && latest.agent.status !== "connected" && buildStatus(latest) === "running" ? [latest.agent.id] : [];
  return {
    id: workspace.id,
    created_at: workspace.createdAt,
    updated_at: workspace.updatedAt,
    owner_id: owner.id,
    owner_name: owner.username,
    owner_avatar_url: "",
    organization_id: org.id,
    organization_name: org.name,
    template_id: template.id,
    template_name: template.spec.name,
    template_display_name: template.spec.displayName ?? "",
    template_icon: "",
    template_allow_user_cancel_workspace_jobs: true,
    template_active_version_id: template.activeVersionId,
    template_require_active_version: false,
    template_use_classic_parameter_flow: true,
    latest_build: buildJson(latest, workspace, views),
    latest_app_status: null,
    outdated: latest.templateVersionId !== template.activeVersionId,
    name: workspace.name,
    ...(workspace.autostartSchedule ? { autostart_schedule: workspace.autostartSchedule } : {}),
    ...(workspace.ttlMs !== null ? { ttl_ms: workspace.ttlMs } : {}),
    last_used_at: workspace.lastUsedAt,
    deleting_at: null,
    dormant_at: null,
    health: { healthy: failing.length === 0, failing_agents: failing },
    automatic_updates: workspace.automaticUpdates,
    allow_renames: false,
    favorite: false,
    next_start_at: null,
    is_prebuild: false,
  };
}
