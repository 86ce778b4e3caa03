// Custom images on exe.dev against the emulator, in process: a template is a `cp` of the setup VM
// (its disk) to an owner-digest name; runs start as `cp` of it, tagged with their labels; delete is
// `rm`. Another environment's, company's or account's template is refused; bad configs name the field.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSetupSession } from "@paperclip-sandbox/conformance";
import { scope, startHarness, type Harness } from "./__fixtures__/harness.js";

/** VMs are jails with an sshd each, started under a loaded machine: generous. */
const T = 180_000;
const TEMPLATE_CMDS = ["new", "ls", "rm", "cp", "tag", "whoami"];

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ tokenCmds: TEMPLATE_CMDS });
}, 60_000);
afterAll(() => h?.close(), 60_000);

/** /exec commands since `mark` ("cp 200"); a setup VM's open SSH channels keep the recorder from ever being idle. */
const calls = (mark: number) => h.emu.requests.list({ since: mark, protocol: "http" }).map((record) => `${record.notes.command ?? record.path} ${record.status}`);

const started = (config: Record<string, unknown>, environmentId = scope.environmentId) => startSetupSession(h.hooks, { ...scope, environmentId, config });

const capture = (config: Record<string, unknown>, session: { providerLeaseId: string | null; metadata?: Record<string, unknown> | null }, environmentId = scope.environmentId) =>
  h.hooks.onEnvironmentCaptureTemplate({
    ...scope,
    environmentId,
    config,
    providerLeaseId: session.providerLeaseId,
    setupMetadata: session.metadata ?? {},
    sourceTemplateRef: null,
    previousTemplateRef: null,
    templateLabel: "paperclip-test",
    timeoutMs: null,
  });

const cancel = (config: Record<string, unknown>, session: { providerLeaseId: string | null; metadata?: Record<string, unknown> | null }, environmentId = scope.environmentId) =>
  h.hooks.onEnvironmentCancelInteractiveSetup({ ...scope, environmentId, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata ?? {}, reason: "promoted" });

const remove = (config: Record<string, unknown>, templateRef: string, who: Partial<typeof scope> = {}) =>
  h.hooks.onEnvironmentDeleteTemplate({ ...scope, ...who, config, templateRef, templateKind: "provider_template", reason: "disabled" });

describe("exe.dev custom images", () => {
  it("captures the setup VM with one cp; a run from the template is a cp plus a tag (3 calls with the owner check) and has the files; delete is rm", { timeout: T }, async () => {
    const config = h.config;
    let at = Date.now();
    const plain = await h.acquire(config, { runId: "plain" });
    const plainMs = Date.now() - at;
    await h.destroy(plain);

    at = Date.now();
    const { session, lease: setup } = await started(config);
    const setupMs = Date.now() - at;
    expect(session.status).toBe("waiting_for_user");
    expect((await h.sh(setup, 'echo tool-v1 > "$HOME/tool" && echo ws > in-workspace.txt')).exitCode).toBe(0);

    let mark = h.emu.requests.mark();
    at = Date.now();
    const captured = await capture(config, session);
    const captureMs = Date.now() - at;
    expect(captured).toMatchObject({ templateKind: "provider_template", templateRef: expect.stringMatching(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/), metadata: { sourceVm: session.providerLeaseId } });
    // cp's answer names the copy's SSH destination: no ls follows it.
    expect(calls(mark)).toEqual(["cp 200"]);
    expect(await cancel(config, session)).toEqual({ status: "cancelled" });
    // The template VM stays (exe.dev has no stop: it runs), with no tags: no lease listing finds it.
    const listed = (await h.emu.leftovers()).filter((line) => line.includes(captured.templateRef));
    expect(listed).toEqual([`vm ${captured.templateRef} (running)`, `jail ${captured.templateRef} (running)`]);
    const { listLeases } = await import("./plugin.js");
    expect((await listLeases({ ...config }, { env: {} })).map((l) => l.providerLeaseId)).not.toContain(captured.templateRef);

    // A run as the host applies the template: the field written, Image and Setup script removed.
    const bound = { ...config, templateRef: captured.templateRef, cpu: 2 };
    mark = h.emu.requests.mark();
    at = Date.now();
    const run = await h.acquire(bound, { runId: "from-template" });
    const fromTemplateMs = Date.now() - at;
    // The owner check lists the template once before anything is made; the copy (its endpoint in cp's answer) is tagged.
    expect(calls(mark)).toEqual(["ls 200", "cp 200", "tag 200"]);
    const read = await h.sh(run, 'cat "$HOME/tool" in-workspace.txt', { config: bound });
    expect([read.exitCode, read.stdout]).toEqual([0, "tool-v1\nws\n"]);
    const runLabels = (await listLeases({ ...config }, { env: {} })).find((l) => l.providerLeaseId === run.providerLeaseId)?.labels;
    expect(runLabels).toMatchObject({ "paperclip-provider": "exe-dev", "paperclip-company": scope.companyId, "paperclip-environment": scope.environmentId });
    await h.destroy(run, bound);

    // A new setup from the template (the host's "edit the custom image") has its files too.
    const again = await startSetupSession(h.hooks, { ...scope, config }, { source: { templateRef: captured.templateRef, kind: "provider_template" } });
    expect((await h.sh(again.lease, 'cat "$HOME/tool"')).stdout).toBe("tool-v1\n");
    await h.hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: again.session.providerLeaseId, setupMetadata: again.session.metadata ?? {}, reason: "cancelled" });

    mark = h.emu.requests.mark();
    expect(await remove(config, captured.templateRef)).toEqual({ deleted: true });
    expect(calls(mark)).toEqual(["ls 200", "rm 200", "ls 200"]);
    expect(await remove(config, captured.templateRef)).toEqual({ deleted: false });
    await expect(h.acquire(bound, { runId: "gone" })).rejects.toThrow(/^templateRef: exe-dev has no template/);
    expect(await h.emu.leftovers()).toEqual([]);
    console.log(`exe.dev (emulator): plain acquire ${plainMs} ms, setup ${setupMs} ms, capture ${captureMs} ms, acquire from template ${fromTemplateMs} ms`);
  });

  it("refuses another environment's, company's or account's template before any VM is made", { timeout: T }, async () => {
    const config = h.config;
    const { session } = await started(config);
    const { templateRef } = await capture(config, session);
    await cancel(config, session);
    try {
      const mark = h.emu.requests.mark();
      await expect(h.hooks.onEnvironmentAcquireLease({ ...scope, environmentId: "env-other", config: { ...config, templateRef }, runId: "r" })).rejects.toThrow(/does not belong|refusing/i);
      await expect(remove(config, templateRef, { companyId: "company-other" })).rejects.toThrow(/does not belong|refusing/i);
      expect(calls(mark)).toEqual(["ls 200", "ls 200"]);

      // Another exe.dev account (another emulator) lists no such VM: the run is refused, naming the field.
      const elsewhere = await startHarness({ tokenCmds: TEMPLATE_CMDS });
      try {
        await expect(elsewhere.acquire({ ...elsewhere.config, templateRef }, { runId: "r" })).rejects.toThrow(/^templateRef: exe-dev has no template/);
        expect(await remove(elsewhere.config, templateRef)).toEqual({ deleted: false });
        expect(await elsewhere.emu.leftovers()).toEqual([]);
      } finally {
        await elsewhere.close();
      }
    } finally {
      expect(await remove(config, templateRef)).toEqual({ deleted: true });
    }
  });

  it("names the field of a bad config: not a template, Image or Setup script with one; Environment is a warning", async () => {
    const validate = (config: Record<string, unknown>) => h.hooks.onEnvironmentValidateConfig({ driverKey: "exe-dev", config });
    const templateRef = "pc-0123456789abcdef-abcdef0a";
    expect(await validate({ ...h.config, templateRef: "my-golden-vm" })).toMatchObject({
      ok: false,
      errors: [expect.stringMatching(/^Custom image template: must be a template Paperclip captured/)],
    });
    expect(await validate({ ...h.config, templateRef, image: "ubuntu:24.04", setupScript: "true" })).toMatchObject({
      ok: false,
      errors: [expect.stringMatching(/^Image: not with Custom image template/), expect.stringMatching(/^Setup script: not with Custom image template/)],
    });
    const warned = await validate({ ...h.config, templateRef, env: ["A=1"] });
    expect(warned.ok).toBe(true);
    expect(warned.warnings).toEqual([expect.stringMatching(/^Environment: not applied to VMs copied from Custom image template/)]);
  });

  it("says which command the token lacks when it may not cp", { timeout: T }, async () => {
    const limited = h.emu.control.mintToken({ cmds: ["new", "ls", "rm"] });
    const config = { ...h.config, apiKey: limited };
    const { session } = await started(config);
    try {
      await expect(capture(config, session)).rejects.toThrow(/may not run "cp".*cp, tag for custom images/);
    } finally {
      await cancel(config, session);
    }
    expect(await h.emu.leftovers()).toEqual([]);
  });
});
