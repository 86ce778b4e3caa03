// The plugin in this process, its hooks called as the host calls them. Not conformance's hostFor:
// these calls may name another company or a whole other config per call, and carry no agent or
// execution workspace unless a test gives them (hostFor's host always sends its own).
import { randomUUID } from "node:crypto";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { configAfterAcquire } from "@paperclip-sandbox/conformance";
import { createCoderPlugin, type CoderPluginDeps } from "../plugin.js";

export const COMPANY = "company-1";
export const ENVIRONMENT = "environment-1";

export function harness(config: Record<string, unknown>, deps: CoderPluginDeps = {}) {
  const plugin = createCoderPlugin({ env: {}, ...deps });
  const hooks = plugin.definition;
  const base = (extra: { companyId?: string; config?: Record<string, unknown>; lease?: PluginEnvironmentLease } = {}) => ({
    driverKey: "coder",
    companyId: extra.companyId ?? COMPANY,
    environmentId: ENVIRONMENT,
    config: configAfterAcquire(extra.config ?? config, extra.lease?.metadata),
  });
  const leaseParams = (lease: PluginEnvironmentLease, extra: { companyId?: string; config?: Record<string, unknown> } = {}) => ({
    ...base({ ...extra, lease }),
    providerLeaseId: lease.providerLeaseId,
    leaseMetadata: lease.metadata,
  });
  return {
    plugin,
    acquire: (extra: Record<string, unknown> = {}) => hooks.onEnvironmentAcquireLease!({ ...base(extra as never), runId: randomUUID(), ...extra } as never),
    execute: async (lease: PluginEnvironmentLease, command: string, options: { args?: string[]; stdin?: string; config?: Record<string, unknown> } = {}) =>
      hooks.onEnvironmentExecute!({ ...base({ ...options, lease }), lease, command, args: options.args, stdin: options.stdin, cwd: lease.metadata?.remoteCwd as string } as never),
    sh: async (lease: PluginEnvironmentLease, script: string, config?: Record<string, unknown>) =>
      hooks.onEnvironmentExecute!({ ...base({ config, lease }), lease, command: "sh", args: ["-c", script], cwd: lease.metadata?.remoteCwd as string } as never),
    release: (lease: PluginEnvironmentLease, extra: { companyId?: string; config?: Record<string, unknown> } = {}) => hooks.onEnvironmentReleaseLease!(leaseParams(lease, extra) as never),
    destroy: (lease: PluginEnvironmentLease, extra: { companyId?: string; config?: Record<string, unknown> } = {}) => hooks.onEnvironmentDestroyLease!(leaseParams(lease, extra) as never),
    resume: (lease: PluginEnvironmentLease, extra: { companyId?: string; config?: Record<string, unknown> } = {}) => hooks.onEnvironmentResumeLease!(leaseParams(lease, extra) as never),
    realize: (lease: PluginEnvironmentLease, metadata: Record<string, unknown>) =>
      hooks.onEnvironmentRealizeWorkspace!({ ...base({ lease }), lease, workspace: { remotePath: lease.metadata?.remoteCwd as string, metadata } } as never),
  };
}
