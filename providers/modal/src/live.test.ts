// The conformance suite (its template-* cases included), the snapshot reuse cycle and a custom-image
// cycle against the real Modal, when a token is given:
//   MODAL_TOKEN_ID=ak-... MODAL_TOKEN_SECRET=as-... npx vitest run providers/modal/src/live.test.ts
// Optional: MODAL_LIVE_APP (default paperclip-sandbox-live), MODAL_LIVE_IMAGE (default node:22),
// MODAL_ENVIRONMENT. Sandboxes are billed while the suite runs; every one is terminated at the end.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { PluginContext, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { listLeases } from "../dist/index.js";
import { createModalPlugin } from "./plugin.js";

const tokenId = process.env.MODAL_TOKEN_ID;
const tokenSecret = process.env.MODAL_TOKEN_SECRET;

if (!tokenId || !tokenSecret) {
  const reason = "modal live tests skipped: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (a Modal token) to run them against modal.com";
  console.log(reason);
  describe("modal live", () => it.skip(reason, () => undefined));
} else {
  const config = {
    appName: process.env.MODAL_LIVE_APP ?? "paperclip-sandbox-live",
    image: process.env.MODAL_LIVE_IMAGE ?? "node:22",
    ...(process.env.MODAL_ENVIRONMENT ? { environment: process.env.MODAL_ENVIRONMENT } : {}),
    sandboxTimeoutMs: 900_000,
    execTimeoutMs: 120_000,
  };
  const workerEnv = { MODAL_TOKEN_ID: tokenId, MODAL_TOKEN_SECRET: tokenSecret };
  const running = async () => (await listLeases(config, { env: workerEnv })).map((lease) => lease.providerLeaseId);

  describeConformance({
    name: "modal (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "modal",
    config,
    invalidConfigs: [{ config: { ...config, sandboxTimeoutMs: 1500 }, error: /^Sandbox timeout \(ms\): must be a whole number of seconds/ }],
    reuseConfig: { ...config, reuseLease: true },
    workerEnv,
    // Only the leases this run made count: the app may hold other people's sandboxes.
    leftovers: async ({ leaseIds }) => (await running()).filter((id) => leaseIds.includes(id)).map((id) => `running sandbox ${id}`),
    labelsOf: async (providerLeaseId, leaseConfig) => (await listLeases(leaseConfig, { env: workerEnv })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
  });

  describe("modal live: reuse by snapshot", () => {
    it("keeps a file and an installed tool across a release, with no sandbox running in between", { timeout: 600_000 }, async () => {
      const plugin = createModalPlugin({ env: workerEnv });
      const hooks = plugin.provider.plugin.definition as Required<typeof plugin.provider.plugin.definition>;
      await hooks.setup({ execution: { log: () => undefined }, logger: console } as unknown as PluginContext);
      const scope = { driverKey: "modal", companyId: "live-company", environmentId: "live-env" };
      const snap = { ...config, reuseLease: true, reuseVia: "snapshot" };
      const lease = await hooks.onEnvironmentAcquireLease({ ...scope, config: snap, runId: `live-${Date.now()}`, agentId: "agent", executionWorkspaceId: "ws" });
      let current: PluginEnvironmentLease = lease;
      try {
        const run = (command: string) => hooks.onEnvironmentExecute({ ...scope, config: snap, lease: current, command: "sh", args: ["-c", command] });
        expect(await run("echo kept > notes.txt && mkdir -p $HOME/.local/bin && printf '#!/bin/sh\\necho tool ok\\n' > $HOME/.local/bin/t && chmod +x $HOME/.local/bin/t")).toMatchObject({
          exitCode: 0,
        });
        expect(await hooks.onEnvironmentReleaseLease({ ...scope, config: snap, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata })).toMatchObject({ state: "stopped" });
        expect(await running()).not.toContain(lease.providerLeaseId);
        current = await hooks.onEnvironmentResumeLease({ ...scope, config: snap, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata });
        expect(current.providerLeaseId).toBe(lease.providerLeaseId);
        expect(await run("cat notes.txt; $HOME/.local/bin/t")).toMatchObject({ exitCode: 0, stdout: "kept\ntool ok\n" });
      } finally {
        await hooks.onEnvironmentDestroyLease({ ...scope, config: snap, providerLeaseId: lease.providerLeaseId!, leaseMetadata: current.metadata });
        plugin.accounts.closeAll();
      }
    });
  });

  describe("modal live: custom image", () => {
    it("captures a setup sandbox as a published image, starts a run from it with its file, and deletes it", { timeout: 600_000 }, async () => {
      const plugin = createModalPlugin({ env: workerEnv });
      const hooks = plugin.provider.plugin.definition as Required<typeof plugin.provider.plugin.definition>;
      await hooks.setup({ execution: { log: () => undefined }, logger: console } as unknown as PluginContext);
      const scope = { driverKey: "modal", companyId: "live-company", environmentId: `live-env-${Date.now()}` };
      const session = await hooks.onEnvironmentStartInteractiveSetup({ ...scope, config, sessionId: `live-${Date.now()}`, expiresAt: new Date(Date.now() + 900_000).toISOString() });
      let templateRef: string | undefined;
      try {
        const setup = { providerLeaseId: session.providerLeaseId, metadata: session.metadata ?? {} };
        expect(await hooks.onEnvironmentExecute({ ...scope, config, lease: setup, command: "sh", args: ["-c", 'echo live-tool > "$HOME/.paperclip-live-marker"'] })).toMatchObject({ exitCode: 0 });
        ({ templateRef } = await hooks.onEnvironmentCaptureTemplate({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata }));
        expect(templateRef).toMatch(/^pc-[0-9a-f]{16}-[0-9a-f]{8}$/);
        await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "promoted" });
        const bound = { ...config, image: templateRef };
        const run = await hooks.onEnvironmentAcquireLease({ ...scope, config: bound, runId: `live-tpl-${Date.now()}` });
        try {
          expect(await hooks.onEnvironmentExecute({ ...scope, config: bound, lease: run, command: "sh", args: ["-c", 'cat "$HOME/.paperclip-live-marker"'] })).toMatchObject({
            exitCode: 0,
            stdout: "live-tool\n",
          });
        } finally {
          await hooks.onEnvironmentDestroyLease({ ...scope, config: bound, providerLeaseId: run.providerLeaseId!, leaseMetadata: run.metadata });
        }
        expect(await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef, reason: "disabled" })).toEqual({ deleted: true });
        templateRef = undefined;
      } finally {
        await hooks.onEnvironmentCancelInteractiveSetup({ ...scope, config, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, reason: "cancelled" }).catch(() => undefined);
        if (templateRef) await hooks.onEnvironmentDeleteTemplate({ ...scope, config, templateRef, reason: "disabled" }).catch(() => undefined);
        plugin.accounts.closeAll();
      }
    });
  });
}
