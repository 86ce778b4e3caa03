// The plugin against a bridge deployed from upstream's template: the emulator's legacyBridge mode
// answers health without `extensions` and 404s this repository's extra routes, with the same Worker
// in workerd behind it. The whole suite runs through the kit's fallbacks (one JSON exec per
// command, file-stdio markers, sync by base64 over exec), and the records show those were used.
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-cloudflare";
import { loadPluginPackage, startWorker } from "@paperclip-sandbox/worker-client";
import { reuseAcrossHostRuns } from "./__fixtures__/host-reuse.js";
import { REUSE_NEEDS_KEEP_ALIVE } from "./config.js";
import { listLeases } from "./plugin.js";

const emu = await runEmulator(emulator, { options: { legacyBridge: true } });
afterAll(() => emu.close(), 60_000);

const pluginDir = fileURLToPath(new URL("..", import.meta.url));
const config = { bridgeBaseUrl: emu.url, bridgeAuthToken: emu.credentials.token!, timeoutMs: 60_000 };
const NO_STREAMS = "an upstream-template bridge has no streams extension: a command's output comes when it ends";
const NO_TERMINAL = "an upstream-template bridge has no terminal route, so a login terminal's open is refused (tested below)";

describeConformance({
  name: "cloudflare (upstream-template bridge in workerd)",
  pluginDir,
  driverKey: "cloudflare",
  config,
  invalidConfigs: [{ config: { ...config, reuseLease: true }, error: new RegExp(`^${REUSE_NEEDS_KEEP_ALIVE.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) }],
  reuseConfig: { ...config, reuseLease: true, keepAlive: true },
  leftovers: () => emu.leftovers(),
  faults: {
    transient: async (kind, count) =>
      void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "*", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "*", times: count }),
    reset: async () => emu.faults.clear(),
  },
  unboundedExpiry: "an upstream-template bridge cannot bound a sandbox's life (no expiry returned: the host fails closed, as it should)",
  skip: {
    "execute-live-output": NO_STREAMS,
    "duplex-channel": `${NO_STREAMS}, so a duplex open is refused (tested below)`,
    // Same manifest and worker as the streams suite, which checks the declarations; here the
    // incremental-output gate would rightly fail (no live output), and the kit refuses a streamed
    // agent session on this bridge at once (the kit's define tests).
    "declared-capabilities-match": `${NO_STREAMS}: incrementalSessionOutput is declared for this repository's bridge and refused on this one`,
    "login-pty-session": NO_TERMINAL,
    "login-pty-bytes": NO_TERMINAL,
    "login-pty-exit-and-signals": NO_TERMINAL,
    "login-pty-session-home-checks": NO_TERMINAL,
  },
});

describe("against an upstream-template bridge", () => {
  it("resumes a reusable lease after the host's workspace upload emptied the workspace (the template's sentinel spot)", async () => {
    const { first, resumed, marker } = await reuseAcrossHostRuns(config);
    expect(resumed).toBe(first);
    expect(marker).toBe("kept");
  });

  it("ran every command as one JSON exec and never called an extension route", () => {
    // Calls the Worker answered (a fault injected in front answers before it, unnoted).
    const records = emu.requests.list({ route: "/api/paperclip-sandbox/v1/exec" }).filter((r) => r.faults.length === 0);
    expect(records.length).toBeGreaterThan(0);
    expect(new Set(records.map((r) => r.notes.execMode))).toEqual(new Set(["json"]));
    const extensionCalls = emu.requests.list().filter((r) => /\/api\/paperclip-sandbox\/v1\/(files|leases$|exec\/)/.test(r.path) && r.method !== "DELETE" && r.status !== 404);
    expect(extensionCalls.map((r) => `${r.method} ${r.path}`)).toEqual([]);
  });

  it("refuses a duplex channel with a clear error, and the lease still works", async () => {
    const worker = await startWorker(await loadPluginPackage(pluginDir));
    const ids = { companyId: `company-${randomUUID().slice(0, 8)}`, environmentId: `environment-${randomUUID().slice(0, 8)}` };
    const base = { driverKey: "cloudflare", ...ids, issueId: "issue-1", config };
    try {
      const lease = await worker.env.acquireLease({ ...base, runId: `run-${randomUUID()}`, agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" });
      const listener = { onData: () => undefined, onExit: () => undefined };
      await expect(worker.duplex.open({ hostRouteId: `route-${randomUUID()}`, driverKey: "cloudflare", ...ids, providerLeaseId: lease.providerLeaseId!, command: ["cat"] }, listener)).rejects.toThrow(
        /cannot carry a duplex channel \(it needs streamed stdin with EOF and binary-safe live output\)/,
      );
      const result = await worker.env.execute({ ...base, lease, command: "printf", args: ["still %s", "here"] });
      expect(result).toMatchObject({ exitCode: 0, stdout: "still here" });
      await worker.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata ?? {} });
    } finally {
      await worker.shutdown();
    }
  });

  it("refuses a login terminal with a clear error naming the bridge to deploy, and the lease still works", async () => {
    const worker = await startWorker(await loadPluginPackage(pluginDir));
    const ids = { companyId: `company-${randomUUID().slice(0, 8)}`, environmentId: `environment-${randomUUID().slice(0, 8)}` };
    const base = { driverKey: "cloudflare", ...ids, issueId: "issue-1", config };
    try {
      const lease = await worker.env.acquireLease({ ...base, runId: `run-${randomUUID()}`, agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" });
      const listener = { onOutput: () => undefined, onExit: () => undefined };
      const open = worker.login.open(
        {
          hostRouteId: `route-${randomUUID()}`,
          driverKey: "cloudflare",
          ...ids,
          providerLeaseId: lease.providerLeaseId!,
          loginCommandKey: "codex",
          sessionHome: `/tmp/paperclip-adapter-login/${randomUUID()}`,
        },
        listener,
      );
      await expect(open).rejects.toThrow(/this bridge has no terminal route \(a bridge from upstream's template\): deploy the bridge from providers\/cloudflare\/bridge/);
      const result = await worker.env.execute({ ...base, lease, command: "printf", args: ["still %s", "here"] });
      expect(result).toMatchObject({ exitCode: 0, stdout: "still here" });
      await worker.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata ?? {} });
    } finally {
      await worker.shutdown();
    }
  });

  it("refuses leases gc, naming what is missing (the template keeps no labels)", async () => {
    await expect(listLeases(config, { env: {} })).rejects.toThrow(/this bridge cannot list its sandboxes .*deploy the bridge from providers\/cloudflare\/bridge/);
  });
});
