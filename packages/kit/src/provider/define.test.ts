import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { defineProviderConfig } from "../config/define.js";
import { fields } from "../config/fields.js";
import { createLocalScriptRunner } from "../exec/local/local-runner.js";
import { STREAM_TRANSPORT } from "../transport.js";
import { hostCallDeadlineMs } from "./acquire.js";
import { defineSandboxProvider } from "./define.js";
import type { SandboxHandle, SandboxProviderDefinition } from "./types.js";

// An in-memory "vendor" whose sandboxes are directories under one temp dir (our own test scripts run there).
const root = fs.mkdtempSync(path.join(os.tmpdir(), "kit-lifecycle-"));
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const schema = z.object({
  timeoutMs: fields.timeoutMs({ default: 30_000 }),
  reuseLease: z.boolean().default(false),
  apiKey: fields.secretRef().optional(),
  size: z.string().default("small"),
});
const config = defineProviderConfig(schema);

interface Box extends SandboxHandle {
  dir: string;
}

interface VendorOptions {
  /** The vendor ignores the requested expiry (it cannot bound its sandboxes). */
  ignoreExpiry?: boolean;
  /** create makes the sandbox, reports it, then fails (a later setup step). */
  failAfterCreate?: boolean;
  /** create makes the sandbox but its response is lost (nothing reported). */
  loseCreateResponse?: boolean;
  /** create waits for this before answering. */
  createGate?: Promise<void>;
  /** The first runner call rejects with "sandbox is stopped". */
  stoppedOnFirstRun?: boolean;
}

function vendor(options: VendorOptions = {}, overrides: Partial<SandboxProviderDefinition<typeof schema, Box>> = {}) {
  const boxes = new Map<string, { labels: Record<string, string>; state: "running" | "stopped"; expiresAt: Date | null }>();
  const calls: string[] = [];
  let next = 0;
  let stoppedOnFirstRun = options.stoppedOnFirstRun === true;
  const handle = (id: string): Box => {
    const box = boxes.get(id)!;
    return { providerLeaseId: id, dir: path.join(root, id), labels: box.labels, state: box.state, expiresAt: box.expiresAt };
  };
  const definition: SandboxProviderDefinition<typeof schema, Box> = {
    driverKey: "memory",
    config,
    transport: STREAM_TRANSPORT,
    workspace: { existing: (box) => box.dir },
    shape: (c) => ({ size: c.size }),
    options: { ttlMs: () => 3_600_000 },
    keep: { reusable: (c) => c.reuseLease, by: "stop" },
    notRunning: (error) => (error as Error).message === "sandbox is stopped",
    async create(input) {
      calls.push("create");
      await options.createGate;
      const id = `box-${++next}-${Math.random().toString(36).slice(2, 8)}`;
      fs.mkdirSync(path.join(root, id), { recursive: true });
      boxes.set(id, { labels: { ...input.labels } as Record<string, string>, state: "running", expiresAt: options.ignoreExpiry ? null : input.expiresAt });
      if (options.loseCreateResponse) throw new Error("connection reset before the response");
      input.created(id);
      if (options.failAfterCreate) throw new Error("setup step 2 failed");
      return handle(id);
    },
    async get(ref) {
      calls.push("get");
      return boxes.has(ref.providerLeaseId) ? handle(ref.providerLeaseId) : null;
    },
    async destroy(ref) {
      calls.push("destroy");
      if (!boxes.has(ref.providerLeaseId)) throw new Error(`destroy of an unknown box ${ref.providerLeaseId}`);
      boxes.delete(ref.providerLeaseId);
      fs.rmSync(path.join(root, ref.providerLeaseId), { recursive: true, force: true });
    },
    async stop(box) {
      calls.push("stop");
      boxes.get(box.providerLeaseId)!.state = "stopped";
    },
    async start(box) {
      calls.push("start");
      boxes.get(box.providerLeaseId)!.state = "running";
      return handle(box.providerLeaseId);
    },
    async list(_config, labels, _context) {
      calls.push("list");
      return [...boxes.entries()].filter(([, box]) => Object.entries(labels).every(([key, value]) => box.labels[key] === value)).map(([id, box]) => ({ providerLeaseId: id, labels: box.labels }));
    },
    runner: (box) => {
      const local = createLocalScriptRunner({ cwd: box.dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
      return {
        capabilities: STREAM_TRANSPORT,
        run: (script, io) => {
          if (stoppedOnFirstRun) {
            stoppedOnFirstRun = false;
            return Promise.reject(new Error("sandbox is stopped"));
          }
          return local.run(script, io);
        },
      };
    },
    ...overrides,
  };
  const { plugin, sandboxCapabilities, listLeases } = defineSandboxProvider(definition);
  const hooks = plugin.definition as unknown as Record<string, (params: Record<string, unknown>) => Promise<any>>;
  const warnings: string[] = [];
  const ctx = { logger: { warn: (m: string) => warnings.push(m), info: () => undefined }, execution: { log: () => undefined } } as unknown as PluginContext;
  return { boxes, calls, hooks, warnings, sandboxCapabilities, listLeases, setup: () => plugin.definition.setup(ctx) };
}

const scope = { driverKey: "memory", companyId: "Company-1", environmentId: "env-1" };
const acquireParams = (cfg: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({
  ...scope,
  config: cfg,
  runId: "run-1",
  agentId: "agent-1",
  executionWorkspaceId: "ws-1",
  ...extra,
});

describe("defineSandboxProvider", () => {
  it("labels the sandbox with provider, company, environment and run, and returns remoteCwd and an expiry", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const box = v.boxes.get(lease.providerLeaseId!)!;
    expect(box.labels).toEqual({ "paperclip-provider": "memory", "paperclip-company": "company-1", "paperclip-environment": "env-1", "paperclip-run": "run-1" });
    expect(lease.metadata).toMatchObject({ remoteCwd: path.join(root, lease.providerLeaseId!), reusable: false });
    expect(Date.parse(lease.expiresAt!)).toBeGreaterThan(Date.now());
    expect(v.sandboxCapabilities).toEqual({
      reusableLeases: true,
      nativeSyncIn: true,
      nativeSyncOut: true,
      concurrentSyncOperations: true,
      duplexCommandStream: true,
      incrementalSessionOutput: true,
      persistentProcessSessions: true,
      independentControlCommands: true,
    });
  });

  it("never returns an expiry later than requestedExpiresAt; without a bound at the vendor it returns none", async () => {
    const v = vendor();
    await v.setup();
    const requested = new Date(Date.now() + 60_000).toISOString();
    expect((await v.hooks.onEnvironmentAcquireLease!(acquireParams({}, { requestedExpiresAt: requested }))).expiresAt).toBe(requested);
    const unbounded = vendor({ ignoreExpiry: true });
    await unbounded.setup();
    const lease = await unbounded.hooks.onEnvironmentAcquireLease!(acquireParams({}, { requestedExpiresAt: requested }));
    expect(lease.expiresAt).toBeNull();
    expect(unbounded.warnings.join("\n")).toMatch(/could not be bounded/);
  });
  it("destroys a sandbox whose acquire failed after create, and reports the original error", async () => {
    const v = vendor({ failAfterCreate: true });
    await v.setup();
    await expect(v.hooks.onEnvironmentAcquireLease!(acquireParams())).rejects.toThrow("setup step 2 failed");
    expect(v.boxes.size).toBe(0);
    // Only its id was reported: it is looked up, then destroyed.
    expect(v.calls).toEqual(["create", "get", "destroy"]);
  });
  it("finds and destroys by the run's labels a sandbox whose create response was lost", async () => {
    const v = vendor({ loseCreateResponse: true });
    await v.setup();
    await expect(v.hooks.onEnvironmentAcquireLease!({ ...acquireParams(), runId: "run-lost" })).rejects.toThrow(/connection reset/);
    expect(v.calls).toEqual(["create", "list", "get", "destroy"]);
    expect(v.boxes.size).toBe(0);
  });
  it("answers within the acquire budget and destroys the sandbox that arrives late", async () => {
    let open!: () => void;
    const v = vendor({ createGate: new Promise<void>((resolve) => (open = resolve)) }, { options: { acquireBudgetMs: () => 200 } });
    await v.setup();
    const started = Date.now();
    await expect(v.hooks.onEnvironmentAcquireLease!(acquireParams())).rejects.toMatchObject({ code: "ACQUIRE_BUDGET_EXCEEDED" });
    // A bound far from the alternative (a slow machine is not a failure): without the budget the create never answers.
    expect(Date.now() - started).toBeLessThan(30_000);
    open();
    await waitFor(() => v.calls.includes("destroy"));
    expect(v.boxes.size).toBe(0);
  });
  it("keeps a reusable lease at release (stop), resumes it (start) after checking the sentinel, and destroys it on a shape change", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams({ reuseLease: true }));
    expect(lease.metadata?.reusable).toBe(true);
    const ref = { ...scope, config: { reuseLease: true }, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata };
    expect(await v.hooks.onEnvironmentReleaseLease!(ref)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(v.boxes.get(lease.providerLeaseId!)?.state).toBe("stopped");
    const resumed = await v.hooks.onEnvironmentResumeLease!(ref);
    expect(resumed.providerLeaseId).toBe(lease.providerLeaseId);
    expect(v.calls).toContain("start");
    await v.hooks.onEnvironmentReleaseLease!(ref);
    const changed = await v.hooks.onEnvironmentResumeLease!({ ...ref, config: { reuseLease: true, size: "large" } });
    expect(changed).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(v.boxes.has(lease.providerLeaseId!)).toBe(false);
  });

  it("answers a resume whose start hangs within the budget, naming the sandbox, and aborts the start's waiting", async () => {
    let startSignal: AbortSignal | undefined;
    const v = vendor(
      {},
      {
        options: { ttlMs: () => 3_600_000, acquireBudgetMs: () => 200 },
        // A start that waits until told to stop (a workspace whose agent never becomes ready).
        start: (_box, _ref, signal) => {
          startSignal = signal;
          return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("start's poll ended")), { once: true }));
        },
      },
    );
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams({ reuseLease: true }));
    const ref = { ...scope, config: { reuseLease: true }, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata };
    await v.hooks.onEnvironmentReleaseLease!(ref);
    const resuming = v.hooks.onEnvironmentResumeLease!(ref);
    await expect(resuming).rejects.toMatchObject({
      code: "START_BUDGET_EXCEEDED",
      message: expect.stringContaining(`memory sandbox ${lease.providerLeaseId} did not start within 200 ms (it was stopped)`),
    });
    expect(startSignal?.aborted).toBe(true);
    // Kept, not destroyed: the next resume or a release decides.
    expect(v.boxes.get(lease.providerLeaseId!)?.state).toBe("stopped");
  });

  it("a run without an execution workspace stays ephemeral even with reuseLease", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams({ reuseLease: true }, { executionWorkspaceId: null }));
    expect(lease.metadata?.reusable).toBe(false);
    const receipt = await v.hooks.onEnvironmentReleaseLease!({ ...scope, config: { reuseLease: true }, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  });

  it("refuses to resume a sandbox labelled for another company, without touching it", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams({ reuseLease: true }));
    const foreign = await v.hooks.onEnvironmentResumeLease!({ ...scope, companyId: "company-2", config: { reuseLease: true }, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    expect(foreign).toEqual({ providerLeaseId: null, metadata: { expired: true, identityMismatch: true } });
    expect(v.boxes.has(lease.providerLeaseId!)).toBe(true);
  });

  it("release with resourceDisposition stop_and_retain keeps the sandbox; a failing stop is an error, never a delete", async () => {
    const v = vendor({}, { stop: async () => Promise.reject(new Error("stop refused by the vendor")) });
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const params = { ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata, resourceDisposition: "stop_and_retain" };
    await expect(v.hooks.onEnvironmentReleaseLease!(params)).rejects.toThrow(/stop refused/);
    expect(v.boxes.has(lease.providerLeaseId!)).toBe(true);
  });

  it("a plain release drains in-flight work for a bounded time, then ends it", async () => {
    const v = vendor({}, { options: { releaseDrainMs: 300 } });
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const running = v.hooks.onEnvironmentExecute!({ ...scope, config: {}, lease, command: "sleep", args: ["30"] });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const receipt = await v.hooks.onEnvironmentReleaseLease!({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
    // It waited the drain (a lower bound on an injected delay), then ended the command: a `sleep 30`
    // left to finish would exit 0.
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect(await running).toMatchObject({ exitCode: null });
  });

  it("keeps secrets of the config out of every error it throws", async () => {
    const v = vendor(
      {},
      {
        async create() {
          throw new Error("401 from https://api.example.com?key=sk-live-123456789 (key sk-live-123456789 rejected)");
        },
      },
    );
    await v.setup();
    const error = (await v.hooks.onEnvironmentAcquireLease!(acquireParams({ apiKey: "sk-live-123456789" })).catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(/401/);
    expect(error.message).not.toContain("sk-live-123456789");
  });

  it("starts a sandbox found stopped on execute and runs the command once more", async () => {
    const v = vendor({ stoppedOnFirstRun: true });
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const result = await v.hooks.onEnvironmentExecute!({ ...scope, config: {}, lease, command: "echo", args: ["again"] });
    expect(result).toMatchObject({ exitCode: 0, stdout: "again\n" });
    expect(v.calls).toContain("start");
  });
});

describe("defineSandboxProvider: what the kit owns", () => {
  it("runs the provider's validate before create, and never creates for a config it refuses", async () => {
    const v = vendor({}, { validate: (c) => ({ errors: c.size === "huge" ? ["Size: huge needs an image"] : [] }) });
    await v.setup();
    await expect(v.hooks.onEnvironmentAcquireLease!(acquireParams({ size: "huge" }))).rejects.toThrow(/Size: huge needs an image/);
    const probe = await v.hooks.onEnvironmentProbe!({ ...scope, config: { size: "huge" } });
    expect(probe).toMatchObject({ ok: false, diagnostics: [{ severity: "error", code: "CONFIG_INVALID", message: "Size: huge needs an image" }] });
    expect(v.calls).toEqual([]);
  });

  it("destroys only a resource labelled for this provider, the lease's company and its environment", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const foreign = { ...scope, companyId: "company-2", config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata };
    await expect(v.hooks.onEnvironmentDestroyLease!(foreign)).rejects.toMatchObject({ code: "lease_not_owned" });
    // Another provider's resource under the same id is refused too, also when a fresh worker looks it up.
    v.boxes.get(lease.providerLeaseId!)!.labels["paperclip-provider"] = "other";
    const fresh = vendor();
    for (const [id, box] of v.boxes) fresh.boxes.set(id, box);
    await fresh.setup();
    const release = { ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata };
    await expect(fresh.hooks.onEnvironmentReleaseLease!(release)).rejects.toThrow(/paperclip-provider is "other", expected "memory"/);
    expect(v.boxes.has(lease.providerLeaseId!)).toBe(true);
    expect(fresh.calls).toEqual(["get"]);
  });

  it("a destroy of a lease the vendor no longer has is a receipt, not an error", async () => {
    const v = vendor();
    await v.setup();
    const receipt = await v.hooks.onEnvironmentDestroyLease!({ ...scope, config: {}, providerLeaseId: "box-0-gone", leaseMetadata: {} });
    expect(receipt).toEqual({ providerLeaseId: "box-0-gone", state: "destroyed" });
    expect(v.calls).toEqual(["get"]);
  });

  it("keep by leave-running calls no stop: the sandbox runs on and the receipt says stopped", async () => {
    const v = vendor({}, { keep: { reusable: () => true, by: "leave-running" }, stop: undefined });
    await v.setup();
    expect(v.sandboxCapabilities.reusableLeases).toBe(true);
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const receipt = await v.hooks.onEnvironmentReleaseLease!({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    expect(receipt).toEqual({ providerLeaseId: lease.providerLeaseId, state: "stopped" });
    expect(v.boxes.get(lease.providerLeaseId!)?.state).toBe("running");
    expect(v.calls).not.toContain("stop");
  });

  it("without keep, leases are not reusable and a release destroys", async () => {
    const v = vendor({}, { keep: undefined });
    await v.setup();
    expect(v.sandboxCapabilities.reusableLeases).toBe(false);
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams({ reuseLease: true }));
    expect(lease.metadata?.reusable).toBe(false);
    expect(await v.hooks.onEnvironmentReleaseLease!({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).toMatchObject({ state: "destroyed" });
  });

  it("makes a $HOME workspace through the runner after create, and reads its real path back", async () => {
    const home = fs.mkdtempSync(path.join(root, "home-"));
    const v = vendor(
      {},
      {
        workspace: { homeSubdir: "paperclip-workspace" },
        runner: (box) => createLocalScriptRunner({ cwd: box.dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home } }),
      },
    );
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    expect(lease.metadata?.remoteCwd).toBe(path.join(fs.realpathSync(home), "paperclip-workspace"));
    expect(fs.statSync(lease.metadata!.remoteCwd as string).isDirectory()).toBe(true);
  });

  it("destroys what it created when the workspace cannot be made", async () => {
    const v = vendor({}, { workspace: { path: "/proc/paperclip-cannot-exist" } });
    await v.setup();
    await expect(v.hooks.onEnvironmentAcquireLease!(acquireParams())).rejects.toThrow(/creating the workspace in sandbox box-\S+ failed \(exit 1\)/);
    expect(v.boxes.size).toBe(0);
  });

  it("derives the leases gc lister from list, filtered by this provider's label", async () => {
    const v = vendor();
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    v.boxes.set("box-foreign", { labels: { "paperclip-provider": "other" }, state: "running", expiresAt: null });
    const listed = await v.listLeases({}, { env: {}, matchLabels: {} });
    expect(listed.map((r) => r.providerLeaseId)).toEqual([lease.providerLeaseId]);
    expect(await vendor({}, { list: undefined }).listLeases({}, { env: {} })).toEqual([]);
  });

  it("keeps a held lease's vendor timeout alive while it is in use, and stops at release", async () => {
    const refreshes: number[] = [];
    const v = vendor({}, { keepAlive: { ttlMs: () => 1_000, refresh: async (_box, _config, ms) => void refreshes.push(ms), idleMs: () => 100 } });
    await v.setup();
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    await v.hooks.onEnvironmentExecute!({ ...scope, config: {}, lease, command: "sleep", args: ["1.2"] });
    expect(refreshes.length).toBeGreaterThanOrEqual(1);
    expect(refreshes.every((ms) => ms <= 1_000)).toBe(true);
    await v.hooks.onEnvironmentReleaseLease!({ ...scope, config: {}, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata });
    const after = refreshes.length;
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(refreshes.length).toBe(after);
  });

  it("budgets acquire from the host's own deadline: the raw config's timeoutMs plus 30 s", () => {
    expect(hostCallDeadlineMs({ timeoutMs: 60_000 })).toBe(90_000);
    expect(hostCallDeadlineMs({})).toBe(30_000);
    expect(hostCallDeadlineMs({ timeoutMs: "60000" })).toBe(30_000);
  });

  it("refuses a duplex channel on a lease whose runner cannot carry one, though the declared transport can", async () => {
    // e.g. a vendor endpoint without streams: the manifest cannot know which endpoint a config names.
    const buffered = { ...STREAM_TRANSPORT, stdin: "buffered" as const, liveOutput: false };
    const v = vendor({}, { runner: () => ({ capabilities: buffered, run: async () => ({ exitCode: 0, signal: null, reason: "exit" as const }) }) });
    await v.setup();
    expect(v.sandboxCapabilities.duplexCommandStream).toBe(true);
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    await expect(v.hooks.onDuplexChannelOpen!({ ...scope, hostRouteId: "route-1", providerLeaseId: lease.providerLeaseId, command: ["cat"] })).rejects.toThrow(
      /memory lease box-\S+: its transport cannot carry a duplex channel \(it needs streamed stdin with EOF and binary-safe live output\)/,
    );
  });

  it("refuses the host's streamed agent session on a lease whose runner delivers output only at the end, and runs other commands", async () => {
    // The manifest declares incrementalSessionOutput from the best transport; this lease's is weaker.
    const buffered = { ...STREAM_TRANSPORT, stdin: "buffered" as const, liveOutput: false };
    const ran: string[] = [];
    const v = vendor({}, { runner: () => ({ capabilities: buffered, run: async (script) => (ran.push(script), { exitCode: 0, signal: null, reason: "exit" as const }) }) });
    await v.setup();
    expect(v.sandboxCapabilities.incrementalSessionOutput).toBe(true);
    const lease = await v.hooks.onEnvironmentAcquireLease!(acquireParams());
    const before = ran.length;
    const session = { ...scope, config: {}, lease, command: "sh", args: ["-c", "node session.mjs"], env: { PAPERCLIP_PROCESS_SESSION_COMMAND_B64: "e30=" } };
    await expect(v.hooks.onEnvironmentExecute!(session)).rejects.toThrow(/memory lease box-\S+: its transport delivers a command's output only when it ends, so it cannot stream an agent session/);
    expect(ran.length).toBe(before);
    await expect(v.hooks.onEnvironmentExecute!({ ...scope, config: {}, lease, command: "echo", args: ["hi"] })).resolves.toMatchObject({ exitCode: 0 });
  });

  it("gives validate the config as sent, so a rule can tell a field given blank from one left out", async () => {
    const seen: Array<Record<string, unknown> | undefined> = [];
    const v = vendor({}, { validate: (_c, raw) => (seen.push(raw), { errors: raw && "size" in raw && raw.size === "" ? ["Size: required when given"] : [] }) });
    expect(await v.hooks.onEnvironmentValidateConfig!({ config: { size: "" } })).toMatchObject({ ok: false, errors: ["Size: required when given"] });
    expect(await v.hooks.onEnvironmentValidateConfig!({ config: {} })).toMatchObject({ ok: true });
    expect(seen).toEqual([{ size: "" }, {}]);
  });
});

async function waitFor(check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
