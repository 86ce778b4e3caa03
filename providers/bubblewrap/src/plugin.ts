import fs from "node:fs";
import path from "node:path";
import { appendBlockedNetworkNote, defineSandboxProvider, LeaseGoneError, REUSE_SENTINEL_PATH, type ListedResource, type SandboxHandle, withScriptPty } from "@paperclip-sandbox/kit";
import {
  checkSocketPathLength,
  createResolver,
  createSandboxBackend,
  defaultSupervisorScript,
  parseResolveOverrides,
  RESOLVE_ENV,
  SANDBOX_PATHS,
  type EgressDenial,
  type Sandbox,
  type SandboxBackend,
  type SandboxSummary,
} from "@paperclip-sandbox/sandbox-backend";
import { DEFAULT_LEASE_TTL_MS, providerConfig, sandboxShape, type BubblewrapConfig } from "./config.js";
import { defaultStateDir, isLeaseId, newLeaseId } from "./leases.js";
import { BUBBLEWRAP_DRIVER_KEY, BUBBLEWRAP_SHAPE, BUBBLEWRAP_TEMPLATES } from "./manifest.js";
import { captureTemplate, deleteTemplate, readTemplate, restoreTemplate } from "./templates.js";
import { findBwrap, probeBubblewrap } from "./probe.js";

export interface BubblewrapPluginDeps {
  /** The worker's environment (for PAPERCLIP_BUBBLEWRAP_RESOLVE and XDG_STATE_HOME). */
  env?: NodeJS.ProcessEnv;
  /** bwrap binary; default: found on PATH. */
  bwrapPath?: string | null;
  /** The compiled supervisor script; default: the backend's. */
  supervisorScript?: string;
  /** Node binary bound into the jail when its tree has none; default: this process's node. */
  nodeBinary?: string;
}

/** A lease is a backend sandbox (its jail, its directories, its egress proxy); none for one that ended. */
interface Lease extends SandboxHandle {
  sandbox?: Sandbox;
}

/** Sandbox directories sync may touch: the jail's writable binds. */
const SYNC_ROOTS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.home, SANDBOX_PATHS.tmp];
const SENTINEL_FILE = `${SANDBOX_PATHS.workspace}/${REUSE_SENTINEL_PATH}`;

const leaseOf = (sandbox: Sandbox): Lease => ({
  providerLeaseId: sandbox.id,
  expiresAt: new Date(sandbox.expiresAt),
  state: sandbox.state === "destroyed" ? "ended" : sandbox.state,
  labels: sandbox.labels,
  sandbox,
});

/** An expired jail, or a create that died half-way (no record, so no labels: never the caller's). */
const endedLease = (summary: SandboxSummary): Lease => ({
  providerLeaseId: summary.id,
  expiresAt: summary.expiresAt === null ? null : new Date(summary.expiresAt),
  state: "ended",
  labels: summary.labels,
});

const sandboxOf = (lease: Lease): Sandbox => {
  if (!lease.sandbox) throw new LeaseGoneError(`bubblewrap lease ${lease.providerLeaseId} has ended`);
  return lease.sandbox;
};

/** A lease idle this long holds no process or memory until its next call (the backend's idleStopMs). */
export const DEFAULT_IDLE_STOP_MS = 10_000;
/** Worker environment: the idle time in ms (0: leases keep their supervisor while idle). */
export const IDLE_STOP_ENV = "PAPERCLIP_BUBBLEWRAP_IDLE_STOP_MS";

function idleStopMsOf(env: NodeJS.ProcessEnv): number {
  const value = env[IDLE_STOP_ENV];
  if (value === undefined || value.trim() === "") return DEFAULT_IDLE_STOP_MS;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 0 || (ms > 0 && ms < 2_000)) throw new Error(`${IDLE_STOP_ENV} must be 0 (never) or a whole number of ms, at least 2000 (got ${value.slice(0, 40)})`);
  return ms;
}

export function createBubblewrapProvider(deps: BubblewrapPluginDeps = {}) {
  const env = deps.env ?? process.env;
  const idleStopMs = idleStopMsOf(env);
  const bwrapPath = deps.bwrapPath === undefined ? findBwrap(env.PATH) : deps.bwrapPath;
  const supervisorScript = deps.supervisorScript ?? defaultSupervisorScript();
  const nodeBinary = deps.nodeBinary ?? fs.realpathSync(process.execPath);
  const resolver = createResolver(parseResolveOverrides(env[RESOLVE_ENV]));
  const backends = new Map<string, SandboxBackend>(); // one per state directory (the config chooses it)
  const stateDirOf = (config: BubblewrapConfig, from: NodeJS.ProcessEnv = env) => config.stateDir ?? defaultStateDir(from);

  const backendFor = (config: BubblewrapConfig, from?: NodeJS.ProcessEnv): SandboxBackend => {
    const stateDir = stateDirOf(config, from);
    let backend = backends.get(stateDir);
    if (!backend) backends.set(stateDir, (backend = createSandboxBackend({ stateDir, bwrapPath: bwrapPath ?? "bwrap", supervisorScript, nodeBinary, resolver, idleStopMs })));
    return backend;
  };

  // The kit recognises a proxy refusal in stderr; our proxy also knows which destination it refused
  // and why, so the note names the ones refused while this command ran.
  const annotate = (sandbox: Sandbox) => {
    const lastBefore: EgressDenial | undefined = sandbox.denials.at(-1);
    return (stderr: string) => {
      const all = sandbox.denials;
      const denied = lastBefore === undefined ? all : all.slice(all.indexOf(lastBefore) + 1);
      const last = denied.at(-1);
      const cause = last && `the sandbox egress proxy refused ${denied.length} connection(s), last ${last.target}: ${last.reason}`;
      return appendBlockedNetworkNote(stderr, sandbox.egress, cause ? { cause } : {});
    };
  };

  return defineSandboxProvider({
    driverKey: BUBBLEWRAP_DRIVER_KEY,
    config: providerConfig,
    transport: BUBBLEWRAP_SHAPE.transport,
    workspace: { existing: () => SANDBOX_PATHS.workspace, syncRoots: () => SYNC_ROOTS },
    shape: sandboxShape,
    options: { ttlMs: (config) => config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS, commandTimeoutMs: (config) => config.timeoutMs },
    keep: { reusable: (config) => config.reuseLease, by: "stop" },
    egress: (config) => ({ allowFqdns: config.egressAllowFqdns, allowCidrs: config.egressAllowCidrs }),
    validate: (config) => {
      const problem = checkSocketPathLength(stateDirOf(config));
      return problem ? { errors: [problem] } : {};
    },
    probe: (config) => probeBubblewrap(config, { bwrapPath, supervisorScript, nodeBinary }),

    async create({ config, labels, expiresAt, grant, reusable, created }) {
      if (!bwrapPath) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
      if (config.rootfs && !fs.statSync(config.rootfs, { throwIfNoEntry: false })?.isDirectory()) {
        throw new Error(`rootfs ${config.rootfs} is not a directory (set "Root filesystem" to a directory holding the sandbox's tree)`);
      }
      const id = newLeaseId();
      created(id);
      const sandbox = await backendFor(config).create({
        id,
        rootfs: config.rootfs,
        limits: { cpu: config.cpu, memoryMb: config.memoryMb, pids: config.pids, diskMb: config.diskMb },
        expiresAt: expiresAt!.getTime(), // the kit always bounds it (options.ttlMs)
        egress: grant,
        labels: { ...labels },
        metadata: { reuse: reusable, ...(config.templateRef ? { templateRef: config.templateRef } : {}) },
      });
      // The kit checked the template is this company's and environment's; nothing has run in the jail yet.
      if (config.templateRef) await restoreTemplate(sandbox, stateDirOf(config), config.templateRef);
      return leaseOf(sandbox);
    },
    async get(ref) {
      if (!isLeaseId(ref.providerLeaseId)) return null;
      const backend = backendFor(ref.config);
      const sandbox = await backend.get(ref.providerLeaseId);
      if (sandbox) return leaseOf(sandbox);
      const summary = await backend.summary(ref.providerLeaseId);
      return summary ? endedLease(summary) : null;
    },
    destroy: (ref, lease) => backendFor(ref.config).destroy(lease.providerLeaseId),
    stop: (lease) => sandboxOf(lease).stop(),
    start: async (lease) => {
      await sandboxOf(lease).start();
      return leaseOf(sandboxOf(lease));
    },
    alive: (lease) => lease.sandbox?.state === "running",
    runner: (lease) => withScriptPty(sandboxOf(lease).runner),
    // Read from the disk without following any link, also while the lease is stopped (a resume then
    // knows it may restart the jail before paying for it); written inside the jail.
    sentinel: {
      read: async (lease) => (await sandboxOf(lease).readStoredFile(SENTINEL_FILE, { maxBytes: 4096 }))?.toString("utf8") ?? null,
      write: async (lease, text) => {
        const roots = [SANDBOX_PATHS.workspace];
        await sandboxOf(lease).files.mkdir(path.posix.dirname(SENTINEL_FILE), { mode: 0o700, roots });
        await sandboxOf(lease).files.write(SENTINEL_FILE, text, { mode: 0o600, createParents: false, roots });
      },
    },
    annotateStderr: (lease) => annotate(sandboxOf(lease)),
    templates: {
      ...BUBBLEWRAP_TEMPLATES,
      async capture(lease, ref, { labels, label }) {
        const record = await captureTemplate(sandboxOf(lease), stateDirOf(ref.config), { labels, label });
        return { templateRef: record.ref, metadata: { bytes: record.bytes } };
      },
      labels: async (templateRef, config) => (await readTemplate(stateDirOf(config), templateRef))?.labels ?? null,
      delete: (templateRef, config) => deleteTemplate(stateDirOf(config), templateRef),
    },
    // Every lease in the config's state directory carrying the labels (a half-made one has none),
    // as the worker would see it: outside the worker the default state dir follows the worker's env.
    async list(config, labels, context) {
      const backend = context.env ? createSandboxBackend({ stateDir: stateDirOf(config, context.env) }) : backendFor(config);
      try {
        return (await backend.list({ labels })).filter((s) => isLeaseId(s.id)).map(listed);
      } finally {
        if (context.env) await backend.close();
      }
    },
    // Jails outlive the worker on purpose (the next worker adopts them); only local handles go.
    async shutdown() {
      await Promise.all([...backends.values()].map((backend) => backend.close()));
      backends.clear();
    },
  });
}

export const createBubblewrapPlugin = (deps: BubblewrapPluginDeps = {}) => createBubblewrapProvider(deps).plugin;

const provider = createBubblewrapProvider();
/** For `paperclip-sandbox leases gc --provider bubblewrap`: the leases in the config's state directory. */
export const listLeases = provider.listLeases;
export default provider.plugin;

function listed(sandbox: SandboxSummary): ListedResource {
  return {
    providerLeaseId: sandbox.id,
    labels: { ...sandbox.labels },
    ...(sandbox.createdAt ? { createdAt: new Date(sandbox.createdAt).toISOString() } : {}),
    expiresAt: sandbox.expiresAt ? new Date(sandbox.expiresAt).toISOString() : null,
    state: sandbox.state,
    ownerAlive: sandbox.ownerAlive,
  };
}
