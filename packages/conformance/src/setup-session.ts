// A custom image's setup session started in process as the host starts one
// (environment-custom-images.js, HOST-CALLS.md §8), for provider tests that drive the hooks directly.
import { randomUUID } from "node:crypto";
import type { PluginDefinition, PluginEnvironmentDriverBaseParams, PluginEnvironmentInteractiveSetupSession, PluginEnvironmentLease, PluginEnvironmentTemplateRefKind } from "@paperclipai/plugin-sdk";

type StartHook = Pick<Required<PluginDefinition>, "onEnvironmentStartInteractiveSetup">;

/** The host's terminal token lifetime and session length (its defaults). */
const CONNECTION_MINUTES = 15;
const SESSION_MS = 3_600_000;

export interface SetupSessionOptions {
  /** The template the session edits (the host's "edit the custom image"); absent: a session from the config. */
  source?: { templateRef: string; kind: PluginEnvironmentTemplateRefKind };
  /** The clock the session's `expiresAt` is counted from. */
  now?: () => number;
}

export interface StartedSetupSession {
  session: PluginEnvironmentInteractiveSetupSession;
  /** The setup sandbox as a lease, for execute and the other lease hooks. */
  lease: PluginEnvironmentLease;
}

/** `onEnvironmentStartInteractiveSetup` with what the host sends: a fresh session id, a 15-minute terminal, an hour's session. */
export async function startSetupSession(hooks: StartHook, base: PluginEnvironmentDriverBaseParams, options: SetupSessionOptions = {}): Promise<StartedSetupSession> {
  const now = options.now ?? Date.now;
  const session = await hooks.onEnvironmentStartInteractiveSetup({
    ...base,
    sessionId: randomUUID(),
    sourceTemplateRef: options.source?.templateRef ?? null,
    sourceTemplateKind: options.source?.kind ?? null,
    connectionExpiresInMinutes: CONNECTION_MINUTES,
    expiresAt: new Date(now() + SESSION_MS).toISOString(),
  });
  return { session, lease: { providerLeaseId: session.providerLeaseId, metadata: session.metadata ?? {} } };
}
