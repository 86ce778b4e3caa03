// Custom images on boxd against the emulator, in process: which boxd calls capture, a start from a
// template and delete make; the owner written into a snapshot's name; another org's key; a capture
// that cannot finish leaves no snapshot.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { startSetupSession } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, newApiKey } from "@paperclip-sandbox/emulator-boxd";
import { createBoxdPlugin } from "./plugin.js";

/** Jails start under a loaded machine: generous. */
const T = 180_000;
const RPC = "/boxd.api.v1.BoxdApi/";
const other = { apiKey: newApiKey(), userId: "other", org: "elsewhere" };
let emu: RunningEmulator;

beforeAll(async () => {
  emu = await runEmulator(emulator, {
    options: {
      accounts: [{ apiKey: newApiKey(), userId: "owner", org: "personal" }, other],
    },
  });
});
afterAll(() => emu.close());

const configOf = (apiKey = emu.credentials.apiKey!) => ({
  apiKey,
  apiUrl: emu.url,
  exchangeUrl: emu.endpoints.exchange!,
  timeoutMs: 60_000,
});

async function pluginFor(apiKey?: string) {
  const boxd = createBoxdPlugin({ env: {} });
  const hooks = boxd.plugin.definition as Required<typeof boxd.plugin.definition>;
  await hooks.setup({
    execution: { log: () => undefined },
    logger: { info() {}, warn() {}, error() {}, debug() {} },
  } as unknown as PluginContext);
  return { boxd, hooks, config: configOf(apiKey) };
}

/**
 * boxd calls since `mark`, by RPC name. Not counted: the token exchange (HTTP) and Exec (commands,
 * and the command channel, whose stream ends on its own idle timer whenever it does).
 */
function callsSince(mark: number): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of emu.requests.list({ since: mark })) {
    if (!r.path.startsWith(RPC) || r.path === `${RPC}Exec`) continue;
    const name = r.path.slice(RPC.length);
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

describe("boxd custom images", () => {
  it("capture is one CreateSnapshot polled to ready; a run starts from it with CreateVmFromSnapshot; delete is DeleteSnapshot", { timeout: T }, async () => {
    const { hooks, config } = await pluginFor();
    const scope = {
      driverKey: "boxd",
      companyId: `co-${randomUUID()}`,
      environmentId: `env-${randomUUID()}`,
      issueId: null,
    };
    const sh = (lease: PluginEnvironmentLease, script: string, cfg: Record<string, unknown> = config) =>
      hooks.onEnvironmentExecute({
        ...scope,
        config: cfg,
        lease,
        command: "sh",
        args: ["-c", script],
      });

    const { session, lease: setup } = await startSetupSession(hooks, { ...scope, config });
    expect((await sh(setup, 'echo tool-v1 > "$HOME/tool"')).exitCode).toBe(0);

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
    expect(captured).toMatchObject({
      templateKind: "snapshot",
      templateRef: expect.stringMatching(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/),
    });
    expect(capture.CreateSnapshot).toBe(1);
    expect(capture.GetSnapshot).toBeGreaterThanOrEqual(1);
    expect(Object.keys(capture).sort()).toEqual(["CreateSnapshot", "GetSnapshot", ...(capture.GetVm ? ["GetVm"] : [])].sort());
    expect(await emu.leftovers()).toContain(`snapshot personal/${captured.templateRef} v1`);
    expect(
      await hooks.onEnvironmentCancelInteractiveSetup({
        ...scope,
        config,
        providerLeaseId: session.providerLeaseId,
        setupMetadata: session.metadata,
        reason: "promoted",
      }),
    ).toEqual({
      status: "cancelled",
    });

    // A run as the host applies the template: the field written, Snapshot removed, the size kept.
    const bound = { ...config, vcpu: 2, templateRef: captured.templateRef };
    mark = emu.requests.mark();
    const run = await hooks.onEnvironmentAcquireLease({
      ...scope,
      config: bound,
      runId: "run-from-template",
    });
    const start = callsSince(mark);
    expect(start.CreateVmFromSnapshot).toBe(1);
    expect(start.CreateVm ?? 0).toBe(0);
    // The owner check reads the snapshot once, before anything is created.
    expect(start.GetSnapshot).toBe(1);
    expect((await sh(run, 'cat "$HOME/tool"', bound)).stdout).toBe("tool-v1\n");
    await hooks.onEnvironmentDestroyLease({
      ...scope,
      config: bound,
      providerLeaseId: run.providerLeaseId,
      leaseMetadata: run.metadata,
    });

    mark = emu.requests.mark();
    expect(
      await hooks.onEnvironmentDeleteTemplate({
        ...scope,
        config,
        templateRef: captured.templateRef,
        templateKind: "snapshot",
        reason: "disabled",
      }),
    ).toEqual({ deleted: true });
    expect(callsSince(mark)).toEqual({ GetSnapshot: 1, DeleteSnapshot: 1 });
    expect(await emu.leftovers()).not.toContain(`snapshot personal/${captured.templateRef} v1`);
    console.log(`boxd vendor calls: capture ${JSON.stringify(capture)}, start from template ${JSON.stringify(start)}`);
  });

  it("another org's key finds no such template: the run is refused, naming the field, before any machine exists", { timeout: T }, async () => {
    const owner = await pluginFor();
    const scope = {
      driverKey: "boxd",
      companyId: "co-org",
      environmentId: "env-org",
      issueId: null,
    };
    const { session } = await startSetupSession(owner.hooks, { ...scope, config: owner.config });
    const { templateRef } = await owner.hooks.onEnvironmentCaptureTemplate({
      ...scope,
      config: owner.config,
      providerLeaseId: session.providerLeaseId,
      setupMetadata: session.metadata,
    });
    await owner.hooks.onEnvironmentCancelInteractiveSetup({
      ...scope,
      config: owner.config,
      providerLeaseId: session.providerLeaseId,
      reason: "promoted",
    });
    try {
      const intruder = await pluginFor(other.apiKey);
      const mark = emu.requests.mark();
      await expect(
        intruder.hooks.onEnvironmentAcquireLease({
          ...scope,
          config: { ...intruder.config, templateRef },
          runId: "r",
        }),
      ).rejects.toThrow(/^templateRef: boxd has no template/);
      expect(callsSince(mark)).toEqual({ GetSnapshot: 1 });
      expect(
        await intruder.hooks.onEnvironmentDeleteTemplate({
          ...scope,
          config: intruder.config,
          templateRef,
          reason: "disabled",
        }),
      ).toEqual({ deleted: false });
    } finally {
      await owner.hooks.onEnvironmentDeleteTemplate({
        ...scope,
        config: owner.config,
        templateRef,
        reason: "disabled",
      });
    }
  });

  it("a capture that cannot finish deletes its half-made snapshot and leaves the setup machine", { timeout: T }, async () => {
    const { hooks, config } = await pluginFor();
    const scope = {
      driverKey: "boxd",
      companyId: "co-fail",
      environmentId: "env-fail",
      issueId: null,
    };
    const { session } = await startSetupSession(hooks, { ...scope, config });
    try {
      // The first GetSnapshot is refused for good (not a retryable code).
      emu.faults.inject({
        kind: "status",
        route: `${RPC}GetSnapshot`,
        grpcCode: 9,
        times: 1,
      });
      await expect(
        hooks.onEnvironmentCaptureTemplate({
          ...scope,
          config,
          providerLeaseId: session.providerLeaseId,
          setupMetadata: session.metadata,
        }),
      ).rejects.toThrow();
      expect((await emu.leftovers()).filter((item) => item.startsWith("snapshot "))).toEqual([]);
      const still = await hooks.onEnvironmentGetInteractiveSetup({
        ...scope,
        config,
        providerLeaseId: session.providerLeaseId,
        setupMetadata: session.metadata,
      });
      expect(still.status).toBe("waiting_for_user");
    } finally {
      emu.faults.clear();
      await hooks.onEnvironmentCancelInteractiveSetup({
        ...scope,
        config,
        providerLeaseId: session.providerLeaseId,
        reason: "cancelled",
      });
    }
  });
});
