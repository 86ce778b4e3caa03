// Custom images on Modal against the emulator, in process, with the real SDK: which Modal calls
// capture, a start from a template and delete make; the owner written into the published name;
// another environment finds no such name; a capture whose publish fails leaves no image.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext, PluginEnvironmentDriverBaseParams, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { startSetupSession } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-modal";
import { createModalPlugin } from "./plugin.js";

/** Jails start under a loaded machine: generous. */
const T = 180_000;
const CONTROL = "/modal.client.ModalClient/";
const SNAPSHOT = "/modal.task_command_router.TaskCommandRouter/TaskSnapshotFilesystem";
let emu: RunningEmulator;
const plugins: Array<ReturnType<typeof createModalPlugin>> = [];

beforeAll(async () => {
  emu = await runEmulator(emulator, {});
});
afterAll(async () => {
  for (const plugin of plugins) plugin.accounts.closeAll();
  await emu?.close();
});

const configOf = (extra: Record<string, unknown> = {}) => ({
  tokenId: emu.credentials.tokenId,
  tokenSecret: emu.credentials.tokenSecret,
  serverUrl: emu.url,
  appName: "templates-test",
  execTimeoutMs: 60_000,
  ...extra,
});

async function pluginFor(extra: Record<string, unknown> = {}) {
  const modal = createModalPlugin({ env: {} });
  plugins.push(modal);
  const hooks = modal.provider.plugin.definition as Required<typeof modal.provider.plugin.definition>;
  await hooks.setup({
    execution: { log: () => undefined },
    logger: { info() {}, warn() {}, error() {}, debug() {} },
  } as unknown as PluginContext);
  return { hooks, config: configOf(extra) };
}

/**
 * Modal calls since `mark`, by RPC name: the control plane and the filesystem snapshot. Not counted:
 * the router's exec calls (commands, and the command channel, an exec that lives on its own timer)
 * and AuthTokenGet (a new client's first call, once per worker and account).
 */
function callsSince(mark: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of emu.requests.list({ since: mark, includeRunning: true })) {
    if ((!r.path.startsWith(CONTROL) && r.path !== SNAPSHOT) || r.path === `${CONTROL}AuthTokenGet`) continue;
    const name = r.path.split("/").pop()!;
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

type Hooks = Awaited<ReturnType<typeof pluginFor>>["hooks"];

async function setupAndCapture(hooks: Hooks, config: Record<string, unknown>, scope: Omit<PluginEnvironmentDriverBaseParams, "config">, script: string) {
  const { session, lease: setup } = await startSetupSession(hooks, { ...scope, config });
  const wrote = await hooks.onEnvironmentExecute({ ...scope, config, lease: setup, command: "sh", args: ["-c", script] } as Parameters<Hooks["onEnvironmentExecute"]>[0]);
  expect(wrote.exitCode).toBe(0);
  return { session, setup };
}

describe("modal custom images", () => {
  it("capture is one TaskSnapshotFilesystem and one ImagePublish; a run starts from the name; delete is ImageDelete and ImageNameDelete", { timeout: T }, async () => {
    const { hooks, config } = await pluginFor();
    const scope = { driverKey: "modal", companyId: `co-${randomUUID()}`, environmentId: `env-${randomUUID()}`, issueId: null };
    const sh = (lease: PluginEnvironmentLease, script: string, cfg: Record<string, unknown>) => hooks.onEnvironmentExecute({ ...scope, config: cfg, lease, command: "sh", args: ["-c", script] });
    const { session } = await setupAndCapture(hooks, config, scope, 'mkdir -p "$HOME/bin" && echo tool-v1 > "$HOME/bin/tool"');

    let mark = emu.requests.mark();
    const captured = await hooks.onEnvironmentCaptureTemplate({
      ...scope,
      config,
      providerLeaseId: session.providerLeaseId,
      setupMetadata: session.metadata,
      sourceTemplateRef: null,
      previousTemplateRef: null,
      templateLabel: "paperclip-test",
      timeoutMs: null,
    });
    const capture = callsSince(mark);
    expect(captured).toMatchObject({ templateKind: "image", templateRef: expect.stringMatching(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/) });
    const imageId = (captured.metadata as { imageId: string }).imageId;
    // The handle is held by the worker: no look-up, just the snapshot and its name.
    expect(capture).toEqual({ TaskSnapshotFilesystem: 1, ImagePublish: 1 });
    expect(await emu.leftovers()).toContain(`image name ${captured.templateRef}:latest in main (-> ${imageId})`);
    expect(await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" })).toEqual({
      status: "cancelled",
    });

    // A run as the host applies the template: the name written into Image.
    const bound = { ...config, image: captured.templateRef };
    mark = emu.requests.mark();
    const run = await hooks.onEnvironmentAcquireLease({ ...scope, config: bound, runId: "run-from-template" });
    const start = callsSince(mark);
    // One look-up of the name: the owner check's, whose image the create then uses.
    expect(start.ImageGetByTag).toBe(1);
    expect(start.SandboxCreateV2).toBe(1);
    expect(start.ImageGetOrCreate ?? 0).toBe(0);
    expect((await sh(run, 'cat "$HOME/bin/tool"', bound)).stdout).toBe("tool-v1\n");
    await hooks.onEnvironmentDestroyLease({ ...scope, config: bound, providerLeaseId: run.providerLeaseId, leaseMetadata: run.metadata });
    // The run's lease does not take the template's image with it.
    expect(await emu.leftovers()).toContain(`image ${imageId} (filesystem snapshot)`);

    mark = emu.requests.mark();
    expect(await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef: captured.templateRef, templateKind: "image", reason: "disabled" })).toEqual({ deleted: true });
    expect(callsSince(mark)).toEqual({ ImageGetByTag: 1, ImageDelete: 1, ImageNameDelete: 1 });
    expect(await emu.leftovers()).toEqual([]);
    // Gone: a run bound to it is refused before any sandbox exists, naming the field.
    mark = emu.requests.mark();
    await expect(hooks.onEnvironmentAcquireLease({ ...scope, config: bound, runId: "after-delete" })).rejects.toThrow(/^image: modal has no template/);
    expect(callsSince(mark).SandboxCreateV2 ?? 0).toBe(0);
    console.log(`modal vendor calls: capture ${JSON.stringify(capture)}, start from template ${JSON.stringify(start)}`);
  });

  it("another company's run or delete is refused, and another environment finds no such name", { timeout: T }, async () => {
    const owner = await pluginFor();
    const scope = { driverKey: "modal", companyId: "co-owner", environmentId: "env-owner", issueId: null };
    const { session } = await setupAndCapture(owner.hooks, owner.config, scope, "echo x > marker");
    const { templateRef } = await owner.hooks.onEnvironmentCaptureTemplate({ ...scope, config: owner.config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata });
    await owner.hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config: owner.config, providerLeaseId: session.providerLeaseId, reason: "promoted" });
    try {
      const intruder = { ...scope, companyId: "co-intruder" };
      let mark = emu.requests.mark();
      await expect(owner.hooks.onEnvironmentAcquireLease({ ...intruder, config: { ...owner.config, image: templateRef }, runId: "r" })).rejects.toThrow(/co-intruder|company/);
      expect(callsSince(mark)).toEqual({ ImageGetByTag: 1 });
      await expect(owner.hooks.onEnvironmentDeleteTemplate({ ...intruder, config: owner.config, templateRef, reason: "disabled" })).rejects.toThrow();

      // Another Modal environment of the same workspace has no such name.
      const staging = await pluginFor({ environment: "staging" });
      mark = emu.requests.mark();
      await expect(staging.hooks.onEnvironmentAcquireLease({ ...scope, config: { ...staging.config, image: templateRef }, runId: "r" })).rejects.toThrow(/^image: modal has no template/);
      expect(callsSince(mark)).toEqual({ ImageGetByTag: 1 });
      expect(await staging.hooks.onEnvironmentDeleteTemplate({ ...scope, config: staging.config, templateRef, reason: "disabled" })).toEqual({ deleted: false });
    } finally {
      expect(await owner.hooks.onEnvironmentDeleteTemplate({ ...scope, config: owner.config, templateRef, reason: "disabled" })).toEqual({ deleted: true });
    }
    expect(await emu.leftovers()).toEqual([]);
  });

  it("a capture whose publish is refused deletes its snapshot image and leaves the setup sandbox", { timeout: T }, async () => {
    const { hooks, config } = await pluginFor();
    const scope = { driverKey: "modal", companyId: "co-fail", environmentId: "env-fail", issueId: null };
    const { session } = await setupAndCapture(hooks, config, scope, "true");
    try {
      emu.faults.inject({ kind: "status", route: `${CONTROL}ImagePublish`, grpcCode: 9, times: 1 });
      await expect(hooks.onEnvironmentCaptureTemplate({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata })).rejects.toThrow();
      expect((await emu.leftovers()).filter((item) => item.startsWith("image"))).toEqual([]);
      const still = await hooks.onEnvironmentGetInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata });
      expect(still.status).toBe("waiting_for_user");
    } finally {
      emu.faults.clear();
      await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, reason: "cancelled" });
    }
  });
});
