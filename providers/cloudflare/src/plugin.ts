import { assertOwnedBy, defineSandboxProvider, type SandboxHandle } from "@paperclip-sandbox/kit";
import { createClientCache, type BridgeClient, type BridgeExtensions, type LeaseRecord } from "./bridge-client.js";
import { cloudflareConfig, configProblems, sessionIdOf, type CloudflareConfig } from "./config.js";
import { CLOUDFLARE_DRIVER_KEY, CLOUDFLARE_SHAPE } from "./manifest.js";
import { bridgeFiles, bridgeProcessRunner, legacyBridgeRunner } from "./runner.js";
import { SessionPool } from "./sessions.js";

export interface CloudflareHandle extends SandboxHandle {
  remoteCwd: string;
  /** Session names of this lease's concurrent commands (per worker). */
  sessions: SessionPool;
  /** What the bridge offers beyond upstream's contract (from its health answer): picks runner and file API. */
  extensions: BridgeExtensions;
}

export interface CloudflarePluginDeps {
  /** The bridge client for a config (default one cached client per bridge URL and token). */
  clientFor?: (config: CloudflareConfig) => BridgeClient;
}

const handleOf = (config: CloudflareConfig, extensions: BridgeExtensions, providerLeaseId: string, remoteCwd: string, labels?: Record<string, string>): CloudflareHandle => ({
  providerLeaseId,
  remoteCwd,
  sessions: new SessionPool(sessionIdOf(config)),
  extensions,
  state: "running",
  expiresAt: null,
  ...(labels ? { labels } : {}),
});

const listed = (record: LeaseRecord) => ({ providerLeaseId: record.providerLeaseId, labels: record.labels, createdAt: record.createdAt, state: "running" });

export function createCloudflarePlugin(deps: CloudflarePluginDeps = {}) {
  const clientFor = deps.clientFor ?? createClientCache();

  return defineSandboxProvider({
    driverKey: CLOUDFLARE_DRIVER_KEY,
    config: cloudflareConfig,
    transport: CLOUDFLARE_SHAPE.transport,
    workspaceDir: (handle: CloudflareHandle) => handle.remoteCwd,
    // A change of any of these means another sandbox (the kit adds company, environment, agent, workspace).
    shape: (config) => ({ bridgeBaseUrl: config.bridgeBaseUrl, requestedCwd: config.requestedCwd, sessionStrategy: config.sessionStrategy }),
    defaultTimeoutMs: (config) => config.timeoutMs,
    validate: (config, raw) => ({ errors: configProblems(config, raw) }),

    async create({ config, params, labels, expiresAt, signal, created }) {
      const problems = configProblems(config);
      if (problems.length > 0) throw new Error(problems.join("; "));
      const client = clientFor(config);
      const remoteCwd = params.requestedCwd?.trim() || config.requestedCwd;
      const extensions = await client.extensionsOf(signal);
      // Only this repository's bridge can bound a sandbox's life (its registry's alarm destroys it).
      const bounded = expiresAt !== null && extensions.expiry;
      const lease = await client.acquire(
        {
          environmentId: params.environmentId,
          runId: params.runId,
          issueId: params.issueId ?? null,
          // Always a sandbox of its own: the kit keeps and resumes a reusable lease by its id
          // (upstream's reuseLease would share one sandbox per environment between runs).
          reuseLease: false,
          keepAlive: config.keepAlive,
          sleepAfter: config.sleepAfter,
          normalizeId: config.normalizeId,
          requestedCwd: remoteCwd,
          sessionStrategy: config.sessionStrategy,
          sessionId: sessionIdOf(config),
          timeoutMs: config.timeoutMs,
          labels: { ...labels },
          ...(bounded ? { expiresAt: expiresAt.toISOString() } : {}),
        },
        signal,
      );
      created(lease.providerLeaseId);
      const cwd = typeof lease.metadata?.remoteCwd === "string" ? lease.metadata.remoteCwd : remoteCwd;
      const handle = handleOf(config, extensions, lease.providerLeaseId, cwd, { ...labels });
      return bounded && lease.expiresAt ? { ...handle, expiresAt: new Date(lease.expiresAt) } : handle;
    },

    // The sandbox as it is now: upstream's resume checks its sentinel (a container that slept without
    // keep-alive, or was destroyed, has none). A call on a destroyed sandbox boots an empty container,
    // so this bridge's registry is asked first, and a container found without its state is destroyed.
    async get(ref) {
      const client = clientFor(ref.config);
      const config = ref.config;
      const remoteCwd = typeof ref.metadata.remoteCwd === "string" ? ref.metadata.remoteCwd : config.requestedCwd;
      const extensions = await client.extensionsOf();
      const record = extensions.leaseLabels ? await client.lease(ref.providerLeaseId) : undefined;
      if (record === null) return null;
      const resumed = await client.resume({
        providerLeaseId: ref.providerLeaseId,
        requestedCwd: remoteCwd,
        keepAlive: config.keepAlive,
        sleepAfter: config.sleepAfter,
        normalizeId: config.normalizeId,
        sessionStrategy: config.sessionStrategy,
        sessionId: sessionIdOf(config),
        timeoutMs: config.timeoutMs,
      });
      if (!resumed) {
        await client.destroy(ref.providerLeaseId).catch(() => undefined);
        return null;
      }
      return handleOf(config, extensions, ref.providerLeaseId, remoteCwd, record?.labels);
    },

    async destroy(ref, handle) {
      const client = clientFor(ref.config);
      const labels = handle?.labels ?? ((await client.extensionsOf()).leaseLabels ? (await client.lease(ref.providerLeaseId))?.labels : undefined);
      // Never another company's or environment's sandbox, whatever id the call names (when the bridge keeps labels).
      if (labels) assertOwnedBy(labels, { driverKey: CLOUDFLARE_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId }, { resource: `cloudflare sandbox ${ref.providerLeaseId}` });
      await client.destroy(ref.providerLeaseId);
    },

    // A Cloudflare container cannot keep its files stopped: a reusable lease's keep-alive sandbox
    // stays running between runs (release tells the bridge to keep it).
    stop: (handle, ref) => clientFor(ref.config).release({ providerLeaseId: handle.providerLeaseId, reuseLease: true, keepAlive: true }),

    // This repository's bridge: streamed processes and its file routes. Upstream's template: one
    // JSON exec per command (file-stdio), sync by base64 over exec.
    runner(handle, config) {
      const client = clientFor(config);
      const target = { providerLeaseId: handle.providerLeaseId, sessionStrategy: config.sessionStrategy, sessions: handle.sessions };
      return handle.extensions.streams ? bridgeProcessRunner(client, target) : legacyBridgeRunner(client, target);
    },
    files: (handle, config) => (handle.extensions.files ? bridgeFiles(clientFor(config), handle.providerLeaseId) : undefined),
    syncPrefer: "file-api",
    async list(config, labels) {
      const client = clientFor(config);
      if (!(await client.extensionsOf()).leaseLabels) return [];
      return (await client.list(labels)).map(listed);
    },
  });
}

export default createCloudflarePlugin().plugin;
