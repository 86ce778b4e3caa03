import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { defineProviderConfig } from "../config/define.js";
import { fields } from "../config/fields.js";
import { createLocalScriptRunner } from "../exec/local/local-runner.js";
import { defineSandboxProviderManifest } from "../plugin/manifest.js";
import { STREAM_TRANSPORT } from "../transport.js";
import { defineSandboxProvider } from "./define.js";
import type { TemplateContract } from "./template-contract.js";
import type { SandboxHandle, SandboxProviderDefinition } from "./types.js";

// An in-memory vendor whose sandboxes are directories and whose templates are copies of them.
const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-templates-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const schema = z.object({
  timeoutMs: fields.timeoutMs({ default: 30_000 }),
  region: z.string().default("here"),
  snapshotId: z.string().max(64).optional(),
});
const config = defineProviderConfig(schema);
const CONTRACT: TemplateContract = { refKind: "snapshot", configField: "snapshotId", identityPaths: ["region"], connectionTypes: [], deletes: true };

interface Box extends SandboxHandle {
  dir: string;
}

function vendor(overrides: Partial<SandboxProviderDefinition<typeof schema, Box>> = {}) {
  const boxes = new Map<string, { labels: Record<string, string>; expiresAt: Date | null; from: string | null }>();
  const snapshots = new Map<string, { labels: Record<string, string>; dir: string }>();
  const calls: string[] = [];
  let next = 0;
  const handle = (id: string): Box => ({ providerLeaseId: id, dir: path.join(root, id), labels: boxes.get(id)!.labels, expiresAt: boxes.get(id)!.expiresAt });
  const definition: SandboxProviderDefinition<typeof schema, Box> = {
    driverKey: "memory",
    config,
    transport: STREAM_TRANSPORT,
    workspace: { existing: (box) => box.dir },
    shape: (c) => ({ region: c.region, snapshotId: c.snapshotId ?? null }),
    options: { ttlMs: () => 3_600_000 },
    async create(input) {
      calls.push(`create ${input.config.snapshotId ?? "clean"}`);
      const id = `box-${++next}-${Math.random().toString(36).slice(2, 8)}`;
      const dir = path.join(root, id);
      const from = input.config.snapshotId ? snapshots.get(input.config.snapshotId) : undefined;
      if (from) fs.cpSync(from.dir, dir, { recursive: true });
      else fs.mkdirSync(dir, { recursive: true });
      boxes.set(id, { labels: { ...input.labels }, expiresAt: input.expiresAt, from: input.config.snapshotId ?? null });
      input.created(id);
      return handle(id);
    },
    get: async (ref) => (boxes.has(ref.providerLeaseId) ? handle(ref.providerLeaseId) : null),
    async destroy(ref) {
      calls.push(`destroy ${ref.providerLeaseId}`);
      boxes.delete(ref.providerLeaseId);
      fs.rmSync(path.join(root, ref.providerLeaseId), { recursive: true, force: true });
    },
    runner: (box) => ({ capabilities: STREAM_TRANSPORT, run: createLocalScriptRunner({ cwd: box.dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } }).run }),
    templates: {
      ...CONTRACT,
      async capture(box, _ref, { labels, label }) {
        calls.push(`capture ${box.providerLeaseId}`);
        const id = `snap-${++next}`;
        const dir = path.join(root, id);
        fs.cpSync(box.dir, dir, { recursive: true });
        snapshots.set(id, { labels: { ...labels }, dir });
        return { templateRef: id, metadata: { label } };
      },
      labels: async (ref) => snapshots.get(ref)?.labels ?? null,
      async delete(ref) {
        calls.push(`delete ${ref}`);
        snapshots.delete(ref);
      },
    },
    ...overrides,
  };
  const provider = defineSandboxProvider(definition);
  const hooks = provider.plugin.definition as unknown as Record<string, ((params: Record<string, unknown>) => Promise<any>) | undefined>;
  const ctx = { logger: { warn: () => undefined, info: () => undefined }, execution: { log: () => undefined } } as unknown as PluginContext;
  return { provider, boxes, snapshots, calls, hooks, setup: () => provider.plugin.definition.setup(ctx) };
}

const scope = { driverKey: "memory", companyId: "company-1", environmentId: "env-1", issueId: null };
const other = { ...scope, environmentId: "env-2" };
const start = (extra: Record<string, unknown> = {}) => ({
  ...scope,
  config: {},
  sessionId: `s-${Math.random().toString(36).slice(2)}`,
  expiresAt: new Date(Date.now() + 600_000).toISOString(),
  connectionExpiresInMinutes: 15,
  ...extra,
});
const sh = async (v: ReturnType<typeof vendor>, lease: { providerLeaseId: string | null; metadata?: Record<string, unknown> }, command: string, where = scope) =>
  v.hooks.onEnvironmentExecute!({ ...where, config: {}, lease, command: "sh", args: ["-c", command] });

/** A setup with a file in it, captured, and the setup cancelled as the host does after promotion. */
async function captured(v: ReturnType<typeof vendor>, content = "tool"): Promise<string> {
  const session = await v.hooks.onEnvironmentStartInteractiveSetup!(start());
  await sh(v, session, `echo ${content} > installed.txt`);
  const result = await v.hooks.onEnvironmentCaptureTemplate!({ ...scope, config: {}, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, templateLabel: "paperclip-env-1-abc" });
  await v.hooks.onEnvironmentCancelInteractiveSetup!({ ...scope, config: {}, providerLeaseId: session.providerLeaseId, reason: "promoted" });
  return result.templateRef;
}

describe("custom images in the lifecycle layer", () => {
  it("declares the contract in the manifest the host reads (binding, identity paths, connection types, delete)", () => {
    const manifest = defineSandboxProviderManifest({
      id: "x.memory",
      version: "1.0.0",
      displayName: "m",
      description: "m",
      driver: { driverKey: "memory", displayName: "m", configSchema: config.jsonSchema },
      shape: { transport: STREAM_TRANSPORT, keepsLeases: false, templates: CONTRACT },
    });
    expect(manifest.environmentDrivers?.[0]).toMatchObject({
      supportsInteractiveSetup: true,
      interactiveSetupConnectionTypes: [],
      supportsTemplateCapture: true,
      templateRefKind: "snapshot",
      templateConfigBinding: { field: "snapshotId", unsetFields: [] },
      templateIdentityPaths: ["region"],
      supportsTemplateDelete: true,
    });
    expect(vendor().provider.supportsTemplates).toBe(true);
  });

  it("advertises no setup or template hook for a provider without templates", () => {
    const v = vendor({ templates: undefined });
    expect(v.provider.supportsTemplates).toBe(false);
    for (const hook of [
      "onEnvironmentStartInteractiveSetup",
      "onEnvironmentGetInteractiveSetup",
      "onEnvironmentCaptureTemplate",
      "onEnvironmentCancelInteractiveSetup",
      "onEnvironmentDeleteTemplate",
    ]) {
      expect(v.hooks[hook], hook).toBeUndefined();
    }
  });

  it("refuses a binding field the config schema does not have (runs from a template would fail validation)", () => {
    expect(() => vendor({ templates: { ...CONTRACT, configField: "image", capture: async () => ({ templateRef: "x" }), labels: async () => null } })).toThrow(
      /template config field "image" is not a field of the config schema/,
    );
  });

  it("starts a setup sandbox as a single-use lease bounded by the session's expiry, waiting for the user", async () => {
    const v = vendor();
    await v.setup();
    const params = start();
    const session = await v.hooks.onEnvironmentStartInteractiveSetup!(params);
    expect(session).toMatchObject({ status: "waiting_for_user", connectionSummary: null, connectionPayload: null });
    expect(session.metadata).toMatchObject({ remoteCwd: path.join(root, session.providerLeaseId), reusable: false, setupSessionId: params.sessionId });
    expect(Date.parse(session.expiresAt)).toBeLessThanOrEqual(Date.parse(params.expiresAt));
    expect(v.boxes.get(session.providerLeaseId)?.labels["paperclip-run"]).toBe(`setup-${params.sessionId}`.toLowerCase().slice(0, 63));
    const got = await v.hooks.onEnvironmentGetInteractiveSetup!({ ...scope, config: {}, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata, includeConnectionPayload: true });
    expect(got.status).toBe("waiting_for_user");
    await v.hooks.onEnvironmentCancelInteractiveSetup!({ ...scope, config: {}, providerLeaseId: session.providerLeaseId, reason: "cancelled" });
  });

  it("captures a setup sandbox; a run whose config names the template starts from it; a setup can start from it", async () => {
    const v = vendor();
    await v.setup();
    const ref = await captured(v, "from-setup");
    expect(v.boxes.size).toBe(0); // the setup sandbox went with the host's `promoted` cancel
    const lease = await v.hooks.onEnvironmentAcquireLease!({ ...scope, config: { snapshotId: ref }, runId: "run-1" });
    expect((await sh(v, lease, "cat installed.txt")).stdout).toBe("from-setup\n");
    const again = await v.hooks.onEnvironmentStartInteractiveSetup!(start({ sourceTemplateRef: ref, sourceTemplateKind: "snapshot" }));
    expect((await sh(v, again, "cat installed.txt")).stdout).toBe("from-setup\n");
    expect(v.calls.filter((c) => c.startsWith("create"))).toEqual(["create clean", `create ${ref}`, `create ${ref}`]);
  });

  it("refuses, before creating anything, a run of another environment whose config names this environment's template", async () => {
    const v = vendor();
    await v.setup();
    const ref = await captured(v);
    const creates = v.calls.filter((c) => c.startsWith("create")).length;
    await expect(v.hooks.onEnvironmentAcquireLease!({ ...other, config: { snapshotId: ref }, runId: "run-2" })).rejects.toThrow(
      /refusing to touch memory template .*paperclip-environment is "env-1", expected "env-2"/,
    );
    await expect(v.hooks.onEnvironmentStartInteractiveSetup!(start({ ...other, sourceTemplateRef: ref }))).rejects.toThrow(/refusing to touch memory template/);
    expect(v.calls.filter((c) => c.startsWith("create")).length).toBe(creates);
  });

  it("hands labels() the owner it checks, for a vendor that keeps a template's owner in its name", async () => {
    const seen: Array<Readonly<Record<string, string>>> = [];
    const byName = vendor({
      templates: {
        ...CONTRACT,
        capture: async () => ({ templateRef: "unused" }),
        delete: async () => undefined,
        // No labels stored: the owner is answered from what the kit expects, only for a ref that says so.
        labels: async (ref, _config, expected) => {
          seen.push(expected);
          return ref === "owned-by-env-1" ? { ...expected } : { "paperclip-provider": "memory", "paperclip-company": "someone", "paperclip-environment": "else" };
        },
      },
    });
    await byName.setup();
    await expect(byName.hooks.onEnvironmentAcquireLease!({ ...scope, config: { snapshotId: "not-ours" }, runId: "run-1" })).rejects.toThrow(/refusing to touch memory template not-ours/);
    expect(seen).toEqual([{ "paperclip-provider": "memory", "paperclip-company": "company-1", "paperclip-environment": "env-1" }]);
    expect(await byName.hooks.onEnvironmentDeleteTemplate!({ ...other, config: {}, templateRef: "owned-by-env-1", reason: "disabled" })).toEqual({ deleted: true });
    expect(seen[1]).toEqual({ "paperclip-provider": "memory", "paperclip-company": "company-1", "paperclip-environment": "env-2" });
  });

  it("refuses a run from a template that does not exist, naming the config field", async () => {
    const v = vendor();
    await v.setup();
    await expect(v.hooks.onEnvironmentAcquireLease!({ ...scope, config: { snapshotId: "snap-gone" }, runId: "run-1" })).rejects.toThrow(/^snapshotId: memory has no template "snap-gone"/);
    expect(v.calls).toEqual([]);
  });

  it("refuses a source of another kind than the declared one", async () => {
    const v = vendor();
    await v.setup();
    await expect(v.hooks.onEnvironmentStartInteractiveSetup!(start({ sourceTemplateRef: "ubuntu:24.04", sourceTemplateKind: "image" }))).rejects.toThrow(
      /sourceTemplateKind: memory starts only from a snapshot, not a image/,
    );
    expect(v.calls).toEqual([]);
  });

  it("cancel destroys the setup sandbox; a second cancel and a get find it missing; the sweep's reason is kept", async () => {
    const v = vendor();
    await v.setup();
    const session = await v.hooks.onEnvironmentStartInteractiveSetup!(start());
    const ref = { ...scope, config: {}, providerLeaseId: session.providerLeaseId, setupMetadata: session.metadata };
    expect(await v.hooks.onEnvironmentCancelInteractiveSetup!({ ...ref, reason: "timed_out" })).toEqual({ status: "timed_out" });
    expect(v.boxes.has(session.providerLeaseId)).toBe(false);
    expect(v.calls).toContain(`destroy ${session.providerLeaseId}`);
    expect(await v.hooks.onEnvironmentCancelInteractiveSetup!({ ...ref, reason: "cancelled" })).toEqual({ status: "missing" });
    expect((await v.hooks.onEnvironmentGetInteractiveSetup!(ref)).status).toBe("missing");
    await expect(v.hooks.onEnvironmentCaptureTemplate!(ref)).rejects.toThrow(/setup sandbox .* is gone/);
  });

  it("never captures, cancels or shows another environment's setup sandbox", async () => {
    const v = vendor();
    await v.setup();
    const session = await v.hooks.onEnvironmentStartInteractiveSetup!(start());
    const foreign = { ...other, config: {}, providerLeaseId: session.providerLeaseId };
    await expect(v.hooks.onEnvironmentCaptureTemplate!(foreign)).rejects.toThrow(/refusing to touch memory setup sandbox/);
    await expect(v.hooks.onEnvironmentCancelInteractiveSetup!(foreign)).rejects.toThrow(/refusing to touch/);
    await expect(v.hooks.onEnvironmentGetInteractiveSetup!(foreign)).rejects.toThrow(/refusing to touch/);
    expect(v.boxes.has(session.providerLeaseId)).toBe(true);
    expect(v.snapshots.size).toBe(0);
    await v.hooks.onEnvironmentCancelInteractiveSetup!({ ...scope, config: {}, providerLeaseId: session.providerLeaseId });
  });

  it("deletes only the caller's template; one that is not there is reported, not an error", async () => {
    const v = vendor();
    await v.setup();
    const ref = await captured(v);
    await expect(v.hooks.onEnvironmentDeleteTemplate!({ ...other, config: {}, templateRef: ref })).rejects.toThrow(/refusing to touch memory template/);
    expect(v.snapshots.has(ref)).toBe(true);
    expect(await v.hooks.onEnvironmentDeleteTemplate!({ ...scope, config: {}, templateRef: ref, templateKind: "snapshot", reason: "disabled" })).toEqual({ deleted: true });
    expect(await v.hooks.onEnvironmentDeleteTemplate!({ ...scope, config: {}, templateRef: ref })).toEqual({ deleted: false });
    await expect(v.hooks.onEnvironmentDeleteTemplate!({ ...scope, config: {}, templateRef: " " })).rejects.toThrow(/^templateRef: name the template to delete/);
  });
});
