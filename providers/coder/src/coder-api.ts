/**
 * Coder's REST API v2 (the control plane), through the kit's vendor HTTP client: no official
 * TypeScript client exists. The shapes are the fields of `codersdk` this provider reads.
 */
import { createVendorClient, isProviderApiError, type VendorClient, type VendorErrorExtractor } from "@paperclip-sandbox/kit";

export type JobStatus = "pending" | "running" | "succeeded" | "canceling" | "canceled" | "failed";
type BuildStatus = "pending" | "starting" | "running" | "stopping" | "stopped" | "failed" | "canceling" | "canceled" | "deleting" | "deleted";

export interface User {
  id: string;
  username: string;
}

interface Organization {
  id: string;
  name: string;
}

export interface Template {
  id: string;
  name: string;
  organization_id: string;
  active_version_id: string;
}

export interface RichParameter {
  name: string;
  type: string;
  required: boolean;
  mutable: boolean;
  ephemeral: boolean;
  default_value: string;
}

interface WorkspaceApp {
  id: string;
  slug: string;
  subdomain: boolean;
  health: "disabled" | "initializing" | "healthy" | "unhealthy";
  sharing_level: string;
}

export interface WorkspaceAgent {
  id: string;
  name: string;
  status: "connecting" | "connected" | "disconnected" | "timeout";
  lifecycle_state: string;
  startup_script_behavior?: "blocking" | "non-blocking";
  environment_variables?: Record<string, string>;
  expanded_directory?: string;
  apps: WorkspaceApp[];
}

export interface WorkspaceBuild {
  id: string;
  build_number: number;
  workspace_id: string;
  transition: "start" | "stop" | "delete";
  status: BuildStatus;
  job: { id: string; status: JobStatus; error?: string };
  resources: Array<{ agents?: WorkspaceAgent[] }>;
  deadline?: string;
}

export interface Workspace {
  id: string;
  name: string;
  owner_id: string;
  owner_name: string;
  organization_id: string;
  template_id: string;
  template_name: string;
  created_at: string;
  ttl_ms?: number;
  latest_build: WorkspaceBuild;
}

interface CreateWorkspaceRequest {
  name: string;
  template_id: string;
  rich_parameter_values: Array<{ name: string; value: string }>;
  ttl_ms?: number;
  automatic_updates?: "always" | "never";
}

/** `codersdk.Response`: `message`, then `detail` and each validation. */
export const coderErrorFields: VendorErrorExtractor = ({ json }) => {
  if (!json || typeof json !== "object") return {};
  const response = json as { message?: unknown; detail?: unknown; validations?: Array<{ field?: unknown; detail?: unknown }> };
  if (typeof response.message !== "string") return {};
  const parts = [response.message];
  if (typeof response.detail === "string" && response.detail) parts.push(response.detail);
  for (const v of response.validations ?? []) if (typeof v.field === "string") parts.push(`${v.field}: ${String(v.detail ?? "")}`);
  return { message: parts.join(": ") };
};

export const JOB_ACTIVE = new Set<JobStatus>(["pending", "running", "canceling"]);

export interface CoderApiOptions {
  baseUrl: string;
  token: string;
  /** `CODER_HEADER` / `CODER_HEADER_COMMAND` headers (control plane only). */
  extraHeaders?: Record<string, string>;
  fetch?: typeof globalThis.fetch;
  onRetry?: (message: string) => void;
}

export interface CoderApi {
  readonly client: VendorClient;
  buildInfo(signal?: AbortSignal): Promise<{ version: string }>;
  me(signal?: AbortSignal): Promise<User>;
  organizations(signal?: AbortSignal): Promise<Organization[]>;
  /** The template of that name in the organization, or null when it has none. */
  template(organizationId: string, name: string, signal?: AbortSignal): Promise<Template | null>;
  richParameters(versionId: string, signal?: AbortSignal): Promise<RichParameter[]>;
  createWorkspace(request: CreateWorkspaceRequest, signal?: AbortSignal): Promise<Workspace>;
  /** The token user's live workspace of that name, or null. */
  workspaceByName(name: string, signal?: AbortSignal): Promise<Workspace | null>;
  /** The workspace, deleted ones included; null when Coder does not know the id (or hides it). */
  workspace(id: string, signal?: AbortSignal): Promise<Workspace | null>;
  listWorkspaces(query: string, signal?: AbortSignal): Promise<Workspace[]>;
  /** Moves the running build's deadline (Coder allows 29 minutes ahead or more). */
  extend(id: string, deadline: string, signal?: AbortSignal): Promise<void>;
  createBuild(workspaceId: string, body: { transition: "start" | "stop" | "delete"; rich_parameter_values?: Array<{ name: string; value: string }> }, signal?: AbortSignal): Promise<WorkspaceBuild>;
  build(id: string, signal?: AbortSignal): Promise<WorkspaceBuild>;
}

export function createCoderApi(options: CoderApiOptions): CoderApi {
  const extraSecrets = Object.values(options.extraHeaders ?? {}).filter((value) => value.length >= 8);
  const client = createVendorClient({
    vendor: "coder",
    baseUrl: `${options.baseUrl}/api/v2`,
    headers: { ...options.extraHeaders, "coder-session-token": options.token },
    secrets: extraSecrets,
    timeoutMs: 30_000,
    retry: { attempts: 3, totalMs: 30_000 },
    extractError: coderErrorFields,
    fetch: options.fetch,
    onRetry: options.onRetry && ((event) => options.onRetry!(`coder ${event.operation}: retrying in ${event.delayMs} ms after: ${event.error.message}`)),
  });
  const orNull = async <T>(call: Promise<T>): Promise<T | null> => {
    try {
      return await call;
    } catch (error) {
      if (isProviderApiError(error) && error.status === 404) return null;
      throw error;
    }
  };
  return {
    client,
    buildInfo: (signal) => client.json({ operation: "buildInfo", path: "buildinfo", idempotent: true, signal }),
    me: (signal) => client.json({ operation: "getUser", path: "users/me", idempotent: true, signal }),
    organizations: (signal) => client.json({ operation: "getOrganizations", path: "users/me/organizations", idempotent: true, signal }),
    template: (organizationId, name, signal) => orNull(client.json<Template>({ operation: "getTemplate", path: ["organizations", organizationId, "templates", name], idempotent: true, signal })),
    richParameters: (versionId, signal) => client.json({ operation: "getRichParameters", path: ["templateversions", versionId, "rich-parameters"], idempotent: true, signal }),
    // Not idempotent: a lost answer may have made a workspace (the lifecycle layer finds it by name).
    createWorkspace: (request, signal) => client.json({ operation: "createWorkspace", method: "POST", path: "users/me/workspaces", json: request, idempotent: false, signal }),
    workspaceByName: (name, signal) => orNull(client.json<Workspace>({ operation: "getWorkspaceByName", path: ["users", "me", "workspace", name], idempotent: true, signal })),
    workspace: (id, signal) => orNull(client.json<Workspace>({ operation: "getWorkspace", path: ["workspaces", id], query: { include_deleted: true }, idempotent: true, signal })),
    listWorkspaces: async (query, signal) =>
      (await client.json<{ workspaces: Workspace[] }>({ operation: "listWorkspaces", path: "workspaces", query: { q: query, limit: 100 }, idempotent: true, signal })).workspaces,
    extend: async (id, deadline, signal) =>
      void (await client.request({ operation: "extendWorkspace", method: "PUT", path: ["workspaces", id, "extend"], json: { deadline }, idempotent: true, signal })),
    createBuild: (workspaceId, body, signal) =>
      client.json({ operation: `createBuild(${body.transition})`, method: "POST", path: ["workspaces", workspaceId, "builds"], json: body, idempotent: false, signal }),
    build: (id, signal) => client.json({ operation: "getBuild", path: ["workspacebuilds", id], idempotent: true, signal }),
  };
}
