// Custom images on Daytona against the emulator, in-process: a template is a Daytona snapshot of the
// setup sandbox whose name carries its owner; vendor calls per capture, start-from and delete; an
// operator's own snapshot is never taken for a template; a forged or foreign name is refused.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginEnvironmentInteractiveSetupSession } from "@paperclipai/plugin-sdk";
import { startSetupSession } from "@paperclip-sandbox/conformance";
import { startHarness, scope, type Harness } from "./__fixtures__/harness.js";
import { ownedTemplateName as templateName, templateNameOwner } from "@paperclip-sandbox/kit";
import type { DaytonaClient } from "./client.js";
import { daytonaTemplates } from "./templates.js";

const owner = {
  "paperclip-provider": "daytona",
  "paperclip-company": "company-1",
  "paperclip-environment": "env-1",
};

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ minuteMs: 60_000 });
});
afterAll(() => h?.close(), 60_000);

const base = (config: Record<string, unknown> = h.config) => ({
  ...scope,
  config,
});
const startSetup = async (config?: Record<string, unknown>, sourceTemplateRef: string | null = null) =>
  (await startSetupSession(h.hooks, { ...base(config), issueId: null }, sourceTemplateRef ? { source: { templateRef: sourceTemplateRef, kind: "snapshot" } } : {})).session;
const capture = (session: PluginEnvironmentInteractiveSetupSession) =>
  h.hooks.onEnvironmentCaptureTemplate({
    ...base(),
    issueId: null,
    providerLeaseId: session.providerLeaseId,
    setupMetadata: session.metadata,
    templateLabel: "t",
    timeoutMs: null,
  } as never);
const cancel = (session: PluginEnvironmentInteractiveSetupSession) =>
  h.hooks.onEnvironmentCancelInteractiveSetup({
    ...base(),
    issueId: null,
    providerLeaseId: session.providerLeaseId,
    setupMetadata: session.metadata,
    reason: "promoted",
  } as never);
const remove = (templateRef: string, companyId = scope.companyId) =>
  h.hooks.onEnvironmentDeleteTemplate({
    ...base(),
    companyId,
    issueId: null,
    templateRef,
    templateKind: "snapshot",
    reason: "disabled",
  } as never);
const asLease = (session: PluginEnvironmentInteractiveSetupSession) => ({
  providerLeaseId: session.providerLeaseId,
  metadata: session.metadata ?? {},
});

describe("capture, start from, delete", () => {
  it("captures in 2 calls, starts a run from the snapshot with 1 call more than a plain acquire, deletes in 3", async () => {
    const session = await startSetup();
    expect(session.status).toBe("waiting_for_user");
    expect((await h.sh(asLease(session), 'echo from-setup > "$HOME/tool.txt"')).exitCode).toBe(0);

    let mark = h.emu.requests.mark();
    const captured = await capture(session);
    expect(await h.calls(mark)).toEqual(["POST /api/sandbox/:sandboxIdOrName/snapshot 200", "GET /api/snapshots/:id 200"]);
    expect(captured).toMatchObject({
      templateKind: "snapshot",
      metadata: { snapshotId: expect.any(String) },
    });
    expect(templateNameOwner(captured.templateRef, owner)).toEqual(owner);
    expect(await h.stateOf(session.providerLeaseId!)).toBe("started");
    await cancel(session);
    expect(await h.stateOf(session.providerLeaseId!)).toBe("gone");

    // The host writes the ref into `snapshot` and drops `image` (and the resources that need it).
    mark = h.emu.requests.mark();
    const run = await h.acquire({ snapshot: captured.templateRef });
    expect(await h.calls(mark)).toEqual(["GET /api/snapshots/:id 200", "POST /api/sandbox 200", "POST /toolbox/:sandboxId/process/execute 200"]);
    expect((await h.sdk.get(run.providerLeaseId!)).snapshot).toBe(captured.templateRef);
    expect((await h.sh(run, 'cat "$HOME/tool.txt"')).stdout).toBe("from-setup\n");
    await h.destroy(run);

    mark = h.emu.requests.mark();
    expect(await remove(captured.templateRef)).toEqual({ deleted: true });
    expect(await h.calls(mark)).toEqual(["GET /api/snapshots/:id 200", "GET /api/snapshots/:id 200", "DELETE /api/snapshots/:id 200"]);
    await expect(h.sdk.snapshot.get(captured.templateRef)).rejects.toMatchObject({ statusCode: 404 });
    expect(await remove(captured.templateRef)).toEqual({ deleted: false });
  });

  it("a template the previous release captured (its long owner name) is still started from and deleted by its owner, and refused for another", async () => {
    const session = await startSetup();
    await h.sh(asLease(session), "echo old-release > marker.txt");
    // What the previous release named a capture of company-1's env-1.
    const legacy = `paperclip-tpl-9-company-1-5-env-1-${randomUUID().replaceAll("-", "").slice(0, 12)}`;
    await (await h.sdk.get(session.providerLeaseId!)).createSnapshot(legacy);
    await cancel(session);
    try {
      const run = await h.acquire({ snapshot: legacy });
      expect((await h.sh(run, "cat marker.txt")).stdout).toBe("old-release\n");
      await h.destroy(run);
      const mark = h.emu.requests.mark();
      await expect(h.acquire({ snapshot: legacy }, { companyId: "company-2" })).rejects.toThrow(/does not belong/);
      expect((await h.calls(mark)).filter((call) => call.startsWith("POST /api/sandbox "))).toEqual([]);
      await expect(remove(legacy, "company-2")).rejects.toThrow(/does not belong/);
      expect((await h.sdk.snapshot.get(legacy)).state).toBe("active");
      expect(await remove(legacy)).toEqual({ deleted: true });
      await expect(h.sdk.snapshot.get(legacy)).rejects.toMatchObject({ statusCode: 404 });
    } finally {
      await h.sdk.snapshot.delete(legacy).catch(() => undefined);
    }
  });

  it("a setup from a template drops the environment's image and resources (they need an image) and starts from the snapshot", async () => {
    const first = await startSetup();
    await h.sh(asLease(first), "echo base > marker.txt");
    const { templateRef } = await capture(first);
    await cancel(first);
    const again = await startSetup({ ...h.config, image: "python:3.12-slim", cpu: 2, memory: 4 }, templateRef);
    try {
      const sandbox = await h.sdk.get(again.providerLeaseId!);
      expect([sandbox.snapshot, sandbox.buildInfo]).toEqual([templateRef, undefined]);
      expect((await h.sh(asLease(again), "cat marker.txt")).stdout).toBe("base\n");
    } finally {
      await cancel(again);
      await remove(templateRef);
    }
  });

  it("a first setup of an image-based environment (the host names its image, kind image) starts from that image", async () => {
    const { session } = await startSetupSession(h.hooks, { ...base({ ...h.config, image: "python:3.12-slim" }), issueId: null }, { source: { templateRef: "python:3.12-slim", kind: "image" } });
    try {
      expect((await h.sdk.get(session.providerLeaseId!)).buildInfo?.dockerfileContent).toContain("FROM python:3.12-slim");
    } finally {
      await cancel(session);
    }
  });

  it("an operator's own snapshot is started from as it is: no template lookup, nothing refused", async () => {
    const mark = h.emu.requests.mark();
    const lease = await h.acquire({ snapshot: "daytonaio/sandbox:emulator" });
    expect(await h.calls(mark)).toEqual(["POST /api/sandbox 200", "POST /toolbox/:sandboxId/process/execute 200"]);
    await h.destroy(lease);
  });

  it("refuses another company's template, a forged owner name and a deleted one before any sandbox is made, and never deletes another's", async () => {
    const session = await startSetup();
    const { templateRef } = await capture(session);
    await cancel(session);
    try {
      await expect(remove(templateRef, "company-2")).rejects.toThrow(/does not belong/);
      expect((await h.sdk.snapshot.get(templateRef)).state).toBe("active");
      // Someone with the account key names a snapshot after another company: its name says whose it is.
      const forged = templateName({
        ...owner,
        "paperclip-company": "company-2",
      });
      await h.sdk.snapshot.create({ name: forged, image: "python:3.12-slim" });
      const mark = h.emu.requests.mark();
      await expect(h.acquire({ snapshot: forged })).rejects.toThrow(/does not belong/);
      await expect(h.acquire({ snapshot: templateName(owner) })).rejects.toThrow(/^snapshot: daytona has no template/);
      expect((await h.calls(mark)).filter((call) => call.startsWith("POST /api/sandbox "))).toEqual([]);
      await h.sdk.snapshot.delete(forged);
    } finally {
      await remove(templateRef);
    }
  });
});

describe("waiting for a captured snapshot (injected clock)", () => {
  /** A client whose snapshot reads `states` in turn (null: gone), and a clock that records each pause. */
  function templatesReading(...states: Array<string | null>) {
    let read = 0;
    const get = async () => {
      const state = states[Math.min(read++, states.length - 1)];
      if (state === null) throw Object.assign(new Error("not found"), { gone: true });
      return { id: "snap-1", state, errorReason: state === "error" ? "disk full" : undefined };
    };
    const client = { call: (_operation: string, run: () => Promise<unknown>) => run(), sdk: { snapshot: { get } } } as unknown as DaytonaClient;
    let t = 0;
    const pauses: number[] = [];
    const templates = daytonaTemplates(() => client, { now: () => t, sleep: async (ms) => void (pauses.push(ms), (t += ms)) });
    const handle = { providerLeaseId: "sb-1", sandbox: { createSnapshot: async () => undefined } } as never;
    return { capture: () => templates.capture!(handle, { config: {} } as never, { labels: owner } as never), pauses, reads: () => read };
  }

  it("reads the snapshot again, the pause growing, until it is active", async () => {
    const t = templatesReading("pending", "pending", "pending", "pending", "active");
    await expect(t.capture()).resolves.toMatchObject({ metadata: { snapshotId: "snap-1" } });
    expect(t.pauses).toEqual([250, 500, 1_000, 2_000]);
  });

  it("ends at once when the snapshot fails or disappears, saying which", async () => {
    await expect(templatesReading("pending", "error").capture()).rejects.toThrow(/did not become usable: error disk full$/);
    await expect(templatesReading("pending", null).capture()).rejects.toThrow(/of sandbox sb-1 did not become usable: it is gone$/);
  });
});
