// Custom images on E2B against the envd emulator, in-process: a template is an E2B snapshot template
// of the setup sandbox named after its owner; vendor calls per capture, run from it and delete; an
// operator's own template is never taken for one of ours; a forged or foreign one is refused.
import { afterAll, describe, expect, it } from "vitest";
import { Sandbox } from "e2b";
import type { PluginEnvironmentInteractiveSetupSession } from "@paperclipai/plugin-sdk";
import { hostFor, startSetupSession } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { ownedTemplateName, templateNameOwner } from "@paperclip-sandbox/kit";
import { createE2bPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
afterAll(() => emu.close());
const sdk = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url };
const config = { ...sdk, timeoutMs: 60_000 };
const identity = { companyId: "company-1", environmentId: "env-1" };
const host = hostFor(createE2bPlugin().plugin, config, { driverKey: "e2b", identity });
const base = { driverKey: "e2b", ...identity, config };
const owner = { "paperclip-provider": "e2b", "paperclip-company": "company-1", "paperclip-environment": "env-1" };

const calls = async (mark: number) => {
  // Control-plane calls only (the hooks awaited them); envd's process streams may still be open.
  return emu.requests
    .list({ since: mark, includeRunning: true })
    .filter((r) => !r.route?.startsWith("/process.") && !r.route?.startsWith("/filesystem.") && !r.route?.startsWith("/files"))
    .map((r) => `${r.method} ${r.route} ${r.status}`);
};
const setup = async () => {
  const hooks = await host.hooks();
  return { hooks, ...(await startSetupSession(hooks, { ...base, issueId: null })) };
};
const finish = async (hooks: Awaited<ReturnType<typeof host.hooks>>, session: PluginEnvironmentInteractiveSetupSession) => {
  const captured = await hooks.onEnvironmentCaptureTemplate!({
    ...base,
    issueId: null,
    providerLeaseId: session.providerLeaseId,
    setupMetadata: session.metadata,
    templateLabel: "t",
    timeoutMs: null,
  } as never);
  await hooks.onEnvironmentCancelInteractiveSetup!({ ...base, issueId: null, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" } as never);
  return captured;
};
const remove = async (templateRef: string, companyId = identity.companyId) =>
  (await host.hooks()).onEnvironmentDeleteTemplate!({ ...base, companyId, issueId: null, templateRef, templateKind: "snapshot", reason: "disabled" } as never);

describe("e2b custom images (envd emulator)", () => {
  it("captures in 1 call, starts a run from the snapshot with 1 look-up more than a plain acquire, deletes in 2", async () => {
    const { hooks, session, lease } = await setup();
    expect((await host.sh(lease, 'echo from-setup > "$HOME/tool.txt"')).exitCode).toBe(0);
    let mark = emu.requests.mark();
    const captured = await hooks.onEnvironmentCaptureTemplate!({
      ...base,
      issueId: null,
      providerLeaseId: session.providerLeaseId,
      setupMetadata: session.metadata,
      templateLabel: "t",
      timeoutMs: null,
    } as never);
    expect(await calls(mark)).toEqual(["POST /sandboxes/:id/snapshots 201"]);
    expect(captured.templateRef).toMatch(/^emulator-team\/pc-[0-9a-f]{16}-[0-9a-f]{8}:default$/);
    expect(templateNameOwner(captured.templateRef.slice("emulator-team/".length, -":default".length), owner)).toEqual(owner);
    await hooks.onEnvironmentCancelInteractiveSetup!({ ...base, issueId: null, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" } as never);

    mark = emu.requests.mark();
    const run = await host.withConfig({ ...config, template: captured.templateRef }).acquire();
    expect((await calls(mark)).slice(0, 2)).toEqual(["GET /snapshots 200", "POST /v2/sandboxes 201"]);
    expect((await host.sh(run, 'cat "$HOME/tool.txt"')).stdout).toBe("from-setup\n");
    await host.destroy(run);

    mark = emu.requests.mark();
    expect(await remove(captured.templateRef)).toEqual({ deleted: true });
    expect(await calls(mark)).toEqual(["GET /snapshots 200", "DELETE /templates/:templateID 204"]);
    expect(await remove(captured.templateRef)).toEqual({ deleted: false });
  });

  it("an operator's own template is started from as it is: no snapshot look-up", async () => {
    const mark = emu.requests.mark();
    const run = await host.withConfig({ ...config, template: "base" }).acquire();
    expect((await calls(mark))[0]).toBe("POST /v2/sandboxes 201");
    await host.destroy(run);
  });

  it("refuses another company's template, a forged owner name and a deleted one before any sandbox is made, and never deletes another's", async () => {
    const { hooks, session } = await setup();
    const { templateRef } = await finish(hooks, session);
    try {
      await expect(remove(templateRef, "company-2")).rejects.toThrow(/does not belong/);
      // Someone with the team's key names a snapshot after another company: its name says whose it is.
      const other = await Sandbox.create("base", sdk);
      const forged = (await Sandbox.createSnapshot(other.sandboxId, { ...sdk, name: ownedTemplateName({ ...owner, "paperclip-company": "company-2" }) })).snapshotId;
      await other.kill();
      const mark = emu.requests.mark();
      await expect(host.withConfig({ ...config, template: forged }).acquire()).rejects.toThrow(/does not belong/);
      await expect(host.withConfig({ ...config, template: ownedTemplateName(owner) }).acquire()).rejects.toThrow(/^template: e2b has no template/);
      expect((await calls(mark)).filter((call) => call.startsWith("POST /v2/sandboxes"))).toEqual([]);
      await Sandbox.deleteSnapshot(forged, sdk);
    } finally {
      await remove(templateRef);
    }
  });
});
