import type {
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentCancelInteractiveSetupParams,
  PluginEnvironmentCancelInteractiveSetupResult,
  PluginEnvironmentCaptureTemplateParams,
  PluginEnvironmentCaptureTemplateResult,
  PluginEnvironmentDeleteTemplateParams,
  PluginEnvironmentDeleteTemplateResult,
  PluginEnvironmentDriverBaseParams,
  PluginEnvironmentGetInteractiveSetupParams,
  PluginEnvironmentInteractiveSetupSession,
  PluginEnvironmentLease,
  PluginEnvironmentReleaseLeaseParams,
  PluginEnvironmentStartInteractiveSetupParams,
} from "@paperclipai/plugin-sdk";
import { assertOwnedBy, ownerLabels, type LeaseOwner } from "../lease/ownership.js";
import { LeaseGoneError } from "./errors.js";
import type { LeaseRef, SandboxHandle, SetupConnection, TemplateDeclaration } from "./types.js";

/** A template ref the config or the host names that this provider cannot start from. */
export class TemplateRefError extends Error {
  override readonly name = "TemplateRefError";
  readonly code = "TEMPLATE_REF_INVALID";
}

/** The pieces of the lifecycle layer the template hooks are built on (see define.ts). */
export interface TemplateHookDeps<H extends SandboxHandle, C> {
  driverKey: string;
  templates: TemplateDeclaration<H, C>;
  guarded<T>(raw: unknown, body: (config: C) => Promise<T>): Promise<T>;
  refOf(params: PluginEnvironmentDriverBaseParams, providerLeaseId: string, config: C, metadata: Record<string, unknown> | undefined): LeaseRef<C>;
  /** The held handle, or the provider's `get`. */
  handleOf(ref: LeaseRef<C>): Promise<H | null>;
  unusable(handle: H): boolean;
  owner(ref: Pick<LeaseRef<C>, "companyId" | "environmentId">): LeaseOwner;
  /** Starts a stopped sandbox (kept leases, dormant jails); the fresh handle. */
  running(handle: H, ref: LeaseRef<C>): Promise<H>;
  /** Runs provider work as the lease's (release drains it). */
  track<T>(providerLeaseId: string, work: Promise<T>): Promise<T>;
  acquire(params: PluginEnvironmentAcquireLeaseParams): Promise<PluginEnvironmentLease>;
  destroy(params: PluginEnvironmentReleaseLeaseParams): Promise<unknown>;
  /**
   * The kit's SSH setup terminal (a declared `ssh` connection without the provider's own
   * `connection`): a fresh token for this setup sandbox. Absent: no kit terminal.
   */
  sshTerminal?: {
    connection(params: PluginEnvironmentDriverBaseParams, ref: LeaseRef<C>, input: { expiresAt: Date | null; minutes: number | null }): Promise<SetupConnection>;
    /** Ends the sandbox's terminals and revokes its tokens (before a capture; release/destroy do it too). */
    closeLease(providerLeaseId: string): Promise<void>;
  };
}

/** What the host stores of a kit terminal when it asked for no payload (tokens are minted only when asked). */
const SSH_SUMMARY = { type: "ssh", username: null, hostRedacted: true, portRedacted: true, commandRedacted: true } as const;

/** A setup sandbox's run label: not a run of any agent, so never matched for reuse. */
const SETUP_RUN_PREFIX = "setup-";

/**
 * The five custom-image hooks: a setup sandbox is an ordinary single-use lease acquired from the
 * environment's config (started from `sourceTemplateRef` when the host names one); capture asks the
 * provider for a template of it; cancel destroys it (the host also cancels after a capture, reason
 * `promoted`); delete removes a template that is the caller's.
 */
export function createTemplateHooks<H extends SandboxHandle, C>(deps: TemplateHookDeps<H, C>) {
  const { templates } = deps;
  const sandboxName = (id: string) => `${deps.driverKey} setup sandbox ${id}`;

  /** A template ref is this provider's, company's and environment's, or refused before anything uses it. */
  const assertTemplateOwned = async (templateRef: string, config: C, who: Pick<LeaseRef<C>, "companyId" | "environmentId">): Promise<boolean> => {
    const owner = deps.owner(who);
    const labels = await templates.labels(templateRef, config, ownerLabels(owner));
    if (!labels) return false;
    assertOwnedBy(labels, owner, { resource: `${deps.driverKey} template ${templateRef}` });
    return true;
  };

  const connectionOf = async (params: PluginEnvironmentDriverBaseParams, handle: H, ref: LeaseRef<C>, minutes: number | null | undefined, include: boolean): Promise<SetupConnection | null> => {
    const input = { expiresAt: handle.expiresAt ?? null, minutes: minutes ?? null };
    if (templates.connection) return templates.connection(handle, ref.config, input);
    if (!deps.sshTerminal) return null;
    return include ? deps.sshTerminal.connection(params, ref, input) : { summary: { ...SSH_SUMMARY }, payload: { type: "ssh" } };
  };

  const session = (handle: H, connection: SetupConnection | null, include: boolean, metadata: Record<string, unknown>): PluginEnvironmentInteractiveSetupSession => ({
    providerLeaseId: handle.providerLeaseId,
    status: "waiting_for_user",
    connectionSummary: connection?.summary ?? null,
    ...(include ? { connectionPayload: connection?.payload ?? null } : {}),
    expiresAt: handle.expiresAt ? handle.expiresAt.toISOString() : null,
    metadata,
  });

  return {
    /** Before an acquire: a ref in the config's template field must be a template of this company and environment. */
    async checkConfiguredTemplate(config: C, who: Pick<LeaseRef<C>, "companyId" | "environmentId">): Promise<void> {
      const value = (config as Record<string, unknown>)[templates.configField];
      if (typeof value !== "string" || value.trim() === "") return;
      if (templates.isTemplateRef && !templates.isTemplateRef(value)) return;
      if (!(await assertTemplateOwned(value, config, who))) {
        throw new TemplateRefError(
          `${templates.configField}: ${deps.driverKey} has no template "${value.slice(0, 80)}" in this config's store (deleted, or captured under another state directory or account); capture a new one`,
        );
      }
    },

    async onEnvironmentStartInteractiveSetup(params: PluginEnvironmentStartInteractiveSetupParams): Promise<PluginEnvironmentInteractiveSetupSession> {
      if (typeof params.sessionId !== "string" || params.sessionId.trim() === "") throw new TemplateRefError("sessionId: the setup session needs an id");
      let source = params.sourceTemplateRef?.trim() || null;
      // With no template yet, the host names the config's own boot source (its `image`, say, of
      // another kind): the setup then starts from the config as it is.
      const configValues = Object.values(params.config as Record<string, unknown>);
      if (source && params.sourceTemplateKind && params.sourceTemplateKind !== templates.refKind && configValues.includes(source)) source = null;
      if (source && params.sourceTemplateKind && params.sourceTemplateKind !== templates.refKind) {
        throw new TemplateRefError(`sourceTemplateKind: ${deps.driverKey} starts only from a ${templates.refKind}, not a ${params.sourceTemplateKind}`);
      }
      const config = { ...(params.config as Record<string, unknown>) };
      for (const field of templates.unsetFields ?? []) if (source) delete config[field];
      if (source) config[templates.configField] = source;
      // The setup sandbox is a lease like a run's: validated, labelled, bounded by the session's expiry.
      const lease = await deps.acquire({
        driverKey: params.driverKey,
        companyId: params.companyId,
        environmentId: params.environmentId,
        config,
        runId: `${SETUP_RUN_PREFIX}${params.sessionId}`,
        requestedExpiresAt: params.expiresAt ?? null,
      });
      const id = lease.providerLeaseId;
      if (!id) throw new Error(`${deps.driverKey}: the setup sandbox's acquire returned no lease id`);
      return deps.guarded(params.config, async (baseConfig) => {
        try {
          const ref = deps.refOf(params, id, baseConfig, lease.metadata);
          const handle = await deps.handleOf(ref);
          if (!handle) throw new LeaseGoneError(`${sandboxName(id)} ended as it started`);
          const connection = await connectionOf(params, handle, ref, params.connectionExpiresInMinutes, true);
          return { ...session(handle, connection, true, { ...lease.metadata, setupSessionId: params.sessionId }), expiresAt: lease.expiresAt ?? null };
        } catch (error) {
          // Never a setup sandbox left running that the host does not know about.
          await deps.sshTerminal?.closeLease(id).catch(() => undefined);
          await deps.destroy({ ...params, providerLeaseId: id, leaseMetadata: lease.metadata, cancelActiveWork: true }).catch(() => undefined);
          throw error;
        }
      });
    },

    async onEnvironmentGetInteractiveSetup(params: PluginEnvironmentGetInteractiveSetupParams): Promise<PluginEnvironmentInteractiveSetupSession> {
      return deps.guarded(params.config, async (config) => {
        const id = params.providerLeaseId;
        const missing: PluginEnvironmentInteractiveSetupSession = { providerLeaseId: id, status: "missing", connectionSummary: null };
        if (!id) return missing;
        const ref = deps.refOf(params, id, config, params.setupMetadata);
        const handle = await deps.handleOf(ref);
        if (!handle || deps.unusable(handle)) return missing;
        assertOwnedBy(handle.labels, deps.owner(ref), { resource: sandboxName(id) });
        const include = params.includeConnectionPayload === true;
        const connection = await connectionOf(params, handle, ref, params.connectionExpiresInMinutes, include);
        return session(handle, connection, include, params.setupMetadata ?? {});
      });
    },

    async onEnvironmentCaptureTemplate(params: PluginEnvironmentCaptureTemplateParams): Promise<PluginEnvironmentCaptureTemplateResult> {
      return deps.guarded(params.config, async (config) => {
        const id = params.providerLeaseId;
        if (!id) throw new LeaseGoneError(`${deps.driverKey}: capture needs the setup sandbox's providerLeaseId`);
        const ref = deps.refOf(params, id, config, params.setupMetadata);
        const found = await deps.handleOf(ref);
        if (!found || deps.unusable(found)) throw new LeaseGoneError(`${sandboxName(id)} is gone (cancelled, expired or destroyed): start a new setup`);
        assertOwnedBy(found.labels, deps.owner(ref), { resource: sandboxName(id) });
        const handle = await deps.running(found, ref);
        // The operator pressed finish: their terminals end, so nothing writes while the trees are copied.
        await deps.sshTerminal?.closeLease(id);
        const label = params.templateLabel?.trim() || null;
        const timeoutMs = typeof params.timeoutMs === "number" && params.timeoutMs > 0 ? params.timeoutMs : null;
        const signal = timeoutMs ? AbortSignal.timeout(timeoutMs) : new AbortController().signal;
        const captured = await deps.track(id, templates.capture(handle, ref, { labels: handle.labels, label, signal }));
        return { templateRef: captured.templateRef, templateKind: templates.refKind, ...(captured.metadata ? { metadata: captured.metadata } : {}) };
      });
    },

    async onEnvironmentCancelInteractiveSetup(params: PluginEnvironmentCancelInteractiveSetupParams): Promise<PluginEnvironmentCancelInteractiveSetupResult> {
      return deps.guarded(params.config, async (config) => {
        const id = params.providerLeaseId;
        if (!id) return { status: "missing" };
        const ref = deps.refOf(params, id, config, params.setupMetadata);
        const handle = await deps.handleOf(ref);
        if (!handle) return { status: "missing" };
        assertOwnedBy(handle.labels, deps.owner(ref), { resource: sandboxName(id) });
        // Ends its work at once and destroys it (an expired one too: it is still there).
        await deps.destroy({ ...params, providerLeaseId: id, leaseMetadata: params.setupMetadata ?? {}, cancelActiveWork: true });
        return { status: params.reason === "timed_out" ? "timed_out" : "cancelled" };
      });
    },

    ...(templates.deletes
      ? {
          async onEnvironmentDeleteTemplate(params: PluginEnvironmentDeleteTemplateParams): Promise<PluginEnvironmentDeleteTemplateResult> {
            return deps.guarded(params.config, async (config) => {
              const templateRef = typeof params.templateRef === "string" ? params.templateRef.trim() : "";
              if (!templateRef) throw new TemplateRefError("templateRef: name the template to delete");
              if (params.templateKind && params.templateKind !== templates.refKind)
                throw new TemplateRefError(`templateKind: ${deps.driverKey} templates are ${templates.refKind}s, not ${params.templateKind}s`);
              if (!(await assertTemplateOwned(templateRef, config, params))) return { deleted: false };
              if (!templates.delete) throw new Error(`${deps.driverKey} declares template deletion but has no delete`);
              await templates.delete(templateRef, config);
              return { deleted: true };
            });
          },
        }
      : {}),
  };
}
