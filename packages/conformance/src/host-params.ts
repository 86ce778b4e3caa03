import { randomUUID } from "node:crypto";
import type { PluginEnvironmentAcquireLeaseParams, PluginEnvironmentDriverBaseParams } from "@paperclipai/plugin-sdk";

/** Ids shaped like the ones the host sends, stable for one suite run. */
export function hostIdentity() {
  const suffix = randomUUID().slice(0, 8);
  return {
    companyId: `company-conformance-${suffix}`,
    environmentId: `environment-conformance-${suffix}`,
    agentId: `agent-conformance-${suffix}`,
    executionWorkspaceId: `execution-workspace-${suffix}`,
    issueId: `issue-conformance-${suffix}`,
  };
}

export type HostIdentity = ReturnType<typeof hostIdentity>;

export function baseParams(identity: HostIdentity, driverKey: string, config: Record<string, unknown>): PluginEnvironmentDriverBaseParams {
  return {
    driverKey,
    companyId: identity.companyId,
    environmentId: identity.environmentId,
    issueId: identity.issueId,
    config,
  };
}

export function acquireParams(identity: HostIdentity, driverKey: string, config: Record<string, unknown>): PluginEnvironmentAcquireLeaseParams {
  return {
    ...baseParams(identity, driverKey, config),
    runId: `run-${randomUUID()}`,
    agentId: identity.agentId,
    executionWorkspaceId: identity.executionWorkspaceId,
    adapterType: "claude_local",
  };
}
