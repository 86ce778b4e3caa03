import { defineSandboxProvider, withCommandChannel, type SandboxHandle } from "@paperclip-sandbox/kit";
import { createClientCache, type BridgeClient, type BridgeExtensions, type LeaseRecord } from "./bridge-client.js";
import { cloudflareConfig, configProblems, sessionIdOf, type CloudflareConfig } from "./config.js";
import { CLOUDFLARE_DRIVER_KEY, CLOUDFLARE_SHAPE } from "./manifest.js";
import { labelsProvenById, ownedRunId } from "./ownership.js";
import { terminalCarrier } from "./channel.js";
import { bridgeFiles, bridgeProcessRunner, legacyBridgeRunner } from "./runner.js";
import { SessionPool } from "./sessions.js";
import { bridgeTerminals, noTerminals } from "./terminal.js";

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

interface HandleInit {
  providerLeaseId: string;
  remoteCwd: string;
  labels: Record<string, string>;
  expiresAt?: Date | null;
  state?: CloudflareHandle["state"];
}

const handleOf = (config: CloudflareConfig, extensions: BridgeExtensions, init: HandleInit): CloudflareHandle => ({
  sessions: new SessionPool(sessionIdOf(config)),
  extensions,
  state: "running",
  expiresAt: null,
  ...init,
});

const listed = (record: LeaseRecord) => ({ providerLeaseId: record.providerLeaseId, labels: record.labels, createdAt: record.createdAt, expiresAt: record.expiresAt ?? null, state: "running" });

/** What acquire, resume and probe tell the bridge about the sandbox (upstream's ProbeBody fields). */
const settingsOf = (config: CloudflareConfig, remoteCwd: string) => ({
  requestedCwd: remoteCwd,
  keepAlive: config.keepAlive,
  sleepAfter: config.sleepAfter,
  normalizeId: config.normalizeId,
  sessionStrategy: config.sessionStrategy,
  sessionId: sessionIdOf(config),
  timeoutMs: config.timeoutMs,
});

/**
 * Against upstream's template: whether the sandbox still holds its workspace (the bridge's sentinel
 * from acquire, or the `.paperclip-runtime` directory Paperclip's runs leave; a fresh container has
 * neither). One JSON exec.
 */
async function templateStateKept(client: BridgeClient, config: CloudflareConfig, providerLeaseId: string, remoteCwd: string): Promise<boolean> {
  const cwd = remoteCwd.replace(/\/+$/, "");
  const answer = await client.exec({
    providerLeaseId,
    command: "/bin/sh",
    args: ["-c", 'test -s "$1/.paperclip-lease.json" || test -d "$1/.paperclip-runtime"', "sh", cwd],
    timeoutMs: 60_000,
    sessionStrategy: config.sessionStrategy,
    sessionId: `${sessionIdOf(config)}-state`,
  });
  return answer.exitCode === 0;
}

export function createCloudflareProvider(deps: CloudflarePluginDeps = {}) {
  const clientFor = deps.clientFor ?? createClientCache();

  return defineSandboxProvider({
    driverKey: CLOUDFLARE_DRIVER_KEY,
    config: cloudflareConfig,
    transport: CLOUDFLARE_SHAPE.transport,
    // The bridge's acquire makes the workspace (and its sentinel) itself.
    workspace: { existing: (handle: CloudflareHandle) => handle.remoteCwd },
    // A change of any of these means another sandbox (the kit adds company, environment, agent, workspace).
    shape: (config) => ({ bridgeBaseUrl: config.bridgeBaseUrl, requestedCwd: config.requestedCwd, sessionStrategy: config.sessionStrategy }),
    // A Cloudflare container cannot keep its files stopped: a reusable lease's keep-alive sandbox
    // runs on between runs (validation makes reuse need keep-alive), and nothing is called.
    keep: { reusable: (config) => config.reuseLease, by: "leave-running" },
    options: { commandTimeoutMs: (config) => config.timeoutMs, syncPrefer: "file-api" },
    validate: (config, raw) => ({ errors: configProblems(config, raw) }),

    async create({ config, params, labels, expiresAt, signal, created }) {
      const client = clientFor(config);
      const remoteCwd = params.requestedCwd?.trim() || config.requestedCwd;
      const extensions = await client.extensionsOf(signal);
      // Only this repository's bridge can bound a sandbox's life (its registry's alarm destroys it).
      const bounded = expiresAt !== null && extensions.expiry;
      const lease = await client.acquire(
        {
          environmentId: params.environmentId,
          // Becomes part of the sandbox id, which so proves its owner even to a bridge without labels.
          runId: ownedRunId({ driverKey: CLOUDFLARE_DRIVER_KEY, companyId: params.companyId, environmentId: params.environmentId, runId: params.runId }),
          issueId: params.issueId ?? null,
          // Always a sandbox of its own: the kit keeps and resumes a reusable lease by its id
          // (upstream's reuseLease would share one sandbox per environment between runs).
          reuseLease: false,
          ...settingsOf(config, remoteCwd),
          labels: { ...labels },
          ...(bounded ? { expiresAt: expiresAt.toISOString() } : {}),
        },
        signal,
      );
      created(lease.providerLeaseId);
      return handleOf(config, extensions, {
        providerLeaseId: lease.providerLeaseId,
        remoteCwd: typeof lease.metadata?.remoteCwd === "string" ? lease.metadata.remoteCwd : remoteCwd,
        labels: { ...labels },
        expiresAt: bounded && lease.expiresAt ? new Date(lease.expiresAt) : null,
      });
    },

    // The sandbox as it is now. Labels: this bridge's registry, else what the sandbox id proves.
    // Any call on a sandbox boots its container, so one whose owner is unproven, or that our
    // registry no longer has, is not called. State: this bridge's resume checks its sentinel (a
    // container that slept without keep-alive has none: `ended`, and the kit destroys it). The
    // template's sentinel sits at the workspace root, which Paperclip's workspace upload empties on
    // every run, so there the workspace's own traces are looked for instead.
    async get(ref) {
      const client = clientFor(ref.config);
      const config = ref.config;
      const remoteCwd = typeof ref.metadata.remoteCwd === "string" ? ref.metadata.remoteCwd : config.requestedCwd;
      const extensions = await client.extensionsOf();
      const init = { providerLeaseId: ref.providerLeaseId, remoteCwd };
      if (extensions.leaseLabels) {
        const record = await client.lease(ref.providerLeaseId);
        if (!record) return null;
        const resumed = await client.resume({ providerLeaseId: ref.providerLeaseId, ...settingsOf(config, remoteCwd) });
        return handleOf(config, extensions, { ...init, labels: record.labels, expiresAt: record.expiresAt ? new Date(record.expiresAt) : null, state: resumed ? "running" : "ended" });
      }
      const labels = labelsProvenById(ref.providerLeaseId, { driverKey: CLOUDFLARE_DRIVER_KEY, companyId: ref.companyId, environmentId: ref.environmentId });
      if (Object.keys(labels).length === 0) return handleOf(config, extensions, { ...init, labels, state: "ended" });
      if (await templateStateKept(client, config, ref.providerLeaseId, remoteCwd)) return handleOf(config, extensions, { ...init, labels });
      // A lost state cannot be told apart from a destroyed sandbox here, and asking started an empty
      // container for the id: end it now, nobody else will.
      await client.destroy(ref.providerLeaseId).catch(() => undefined);
      return null;
    },

    destroy: (ref) => clientFor(ref.config).destroy(ref.providerLeaseId),

    // This repository's bridge: streamed processes (unless live output is turned off), its file
    // routes and login terminals. Upstream's template: one JSON exec per command (file-stdio), sync
    // by base64 over exec, and a terminal open refused with what to deploy.
    // With streamed processes and the terminal route, commands go over the kit's command channel,
    // its multiplexer on a raw terminal (channel.ts): no bridge request per command. Its process's
    // exits report a signal as the shell does (128 + n), and so does the channel. Sync stays on the
    // file routes (a terminal is not trusted with bulk transfer).
    runner(handle, config) {
      const client = clientFor(config);
      const target = { providerLeaseId: handle.providerLeaseId, sessionStrategy: config.sessionStrategy, sessions: handle.sessions };
      const streamed = handle.extensions.streams && config.liveOutput;
      const runner = streamed ? bridgeProcessRunner(client, target) : legacyBridgeRunner(client, target);
      const pty = handle.extensions.terminal ? bridgeTerminals(config, handle.providerLeaseId, runner) : noTerminals();
      const commands =
        streamed && handle.extensions.terminal
          ? withCommandChannel(runner, {
              lease: handle.providerLeaseId,
              carrier: terminalCarrier(config, handle.providerLeaseId, runner),
              signalsAsExitStatus: true,
              carriesSync: false,
            })
          : runner;
      return { capabilities: Object.freeze({ ...runner.capabilities, pty: true }), run: (script, io) => commands.run(script, io), pty };
    },
    files: (handle, config) => (handle.extensions.files ? bridgeFiles(clientFor(config), handle.providerLeaseId) : undefined),

    async list(config, labels, { env }) {
      const client = clientFor(config);
      if ((await client.extensionsOf()).leaseLabels) return (await client.list(labels)).map(listed);
      // Inside the worker (a lost create's lookup) there is simply nothing to find; `leases gc`
      // (the CLI passes env) is told why.
      if (env === undefined) return [];
      throw new Error("this bridge cannot list its sandboxes (a bridge from upstream's template keeps no labels): deploy the bridge from providers/cloudflare/bridge");
    },
  });
}

export const createCloudflarePlugin = (deps: CloudflarePluginDeps = {}) => createCloudflareProvider(deps).plugin;

const provider = createCloudflareProvider();
/** For `paperclip-sandbox leases gc --provider cloudflare`: the bridge's sandboxes by label (this repository's bridge only). */
export const listLeases = provider.listLeases;
export default provider.plugin;
