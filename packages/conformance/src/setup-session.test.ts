// startSetupSession: a provider test's setup session starts with what the host sends.
import { describe, expect, it } from "vitest";
import type { PluginEnvironmentStartInteractiveSetupParams } from "@paperclipai/plugin-sdk";
import { startSetupSession } from "./setup-session.js";

function recordingHooks(answer: { providerLeaseId: string | null; metadata?: Record<string, unknown> }) {
  const sent: PluginEnvironmentStartInteractiveSetupParams[] = [];
  const hooks = {
    onEnvironmentStartInteractiveSetup: async (params: PluginEnvironmentStartInteractiveSetupParams) => {
      sent.push(params);
      return { ...answer, status: "waiting_for_user" as const, connectionSummary: null };
    },
  };
  return { hooks, sent };
}

const base = { driverKey: "demo", companyId: "company-1", environmentId: "environment-1", issueId: null, config: { image: "alpine" } };

describe("startSetupSession", () => {
  it("sends the host's parameters: a fresh session id, no source template, a 15-minute terminal, an hour's session on the given clock", async () => {
    const { hooks, sent } = recordingHooks({ providerLeaseId: "setup-1", metadata: { remoteCwd: "/work" } });
    const { session, lease } = await startSetupSession(hooks, base, { now: () => Date.UTC(2026, 0, 1) });
    await startSetupSession(hooks, base);
    expect(sent[0]).toEqual({
      ...base,
      sessionId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      sourceTemplateRef: null,
      sourceTemplateKind: null,
      connectionExpiresInMinutes: 15,
      expiresAt: "2026-01-01T01:00:00.000Z",
    });
    expect(sent[1]!.sessionId).not.toBe(sent[0]!.sessionId);
    expect(session.providerLeaseId).toBe("setup-1");
    expect(lease).toEqual({ providerLeaseId: "setup-1", metadata: { remoteCwd: "/work" } });
  });

  it("names the template a session edits, and gives a lease empty metadata when the session has none", async () => {
    const { hooks, sent } = recordingHooks({ providerLeaseId: "setup-2" });
    const { lease } = await startSetupSession(hooks, base, { source: { templateRef: "pc-0123456789abcdef-abcdef01", kind: "snapshot" } });
    expect(sent[0]).toMatchObject({ sourceTemplateRef: "pc-0123456789abcdef-abcdef01", sourceTemplateKind: "snapshot" });
    expect(lease).toEqual({ providerLeaseId: "setup-2", metadata: {} });
  });
});
