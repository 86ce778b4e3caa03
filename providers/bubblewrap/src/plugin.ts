import fs from "node:fs";
import path from "node:path";
import { appendBlockedNetworkNote, defineSandboxProvider, REUSE_SENTINEL_PATH, type SandboxHandle } from "@paperclip-sandbox/kit";
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
} from "@paperclip-sandbox/sandbox-backend";
import { DEFAULT_LEASE_TTL_MS, providerConfig, sandboxShape, type BubblewrapConfig } from "./config.js";
import { defaultStateDir, isLeaseId, newLeaseId } from "./leases.js";
import { BUBBLEWRAP_DRIVER_KEY, BUBBLEWRAP_SHAPE } from "./manifest.js";
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

/** A lease is a backend sandbox (its jail, its directories, its egress proxy). */
interface Lease extends SandboxHandle {
  sandbox: Sandbox;
}

/** Sandbox directories sync may touch: the jail's writable binds. */
const SYNC_ROOTS = [SANDBOX_PATHS.workspace, SANDBOX_PATHS.home, SANDBOX_PATHS.tmp];
const SENTINEL_FILE = `${SANDBOX_PATHS.workspace}/${REUSE_SENTINEL_PATH}`;

const leaseOf = (sandbox: Sandbox): Lease => ({
  providerLeaseId: sandbox.id,
  expiresAt: new Date(sandbox.expiresAt),
  state: sandbox.state === "destroyed" ? "stopped" : sandbox.state,
  labels: sandbox.labels,
  sandbox,
});

export function createBubblewrapProvider(deps: BubblewrapPluginDeps = {}) {
  const env = deps.env ?? process.env;
  const bwrapPath = deps.bwrapPath === undefined ? findBwrap(env.PATH) : deps.bwrapPath;
  const supervisorScript = deps.supervisorScript ?? defaultSupervisorScript();
  const nodeBinary = deps.nodeBinary ?? fs.realpathSync(process.execPath);
  const resolver = createResolver(parseResolveOverrides(env[RESOLVE_ENV]));
  const backends = new Map<string, SandboxBackend>(); // one per state directory (the config chooses it)
  const stateDirOf = (config: BubblewrapConfig) => config.stateDir ?? defaultStateDir(env);

  const backendFor = (config: BubblewrapConfig): SandboxBackend => {
    const stateDir = stateDirOf(config);
    let backend = backends.get(stateDir);
    if (!backend) backends.set(stateDir, (backend = createSandboxBackend({ stateDir, bwrapPath: bwrapPath ?? "bwrap", supervisorScript, nodeBinary, resolver })));
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
    workspaceDir: () => SANDBOX_PATHS.workspace,
    syncRoots: () => SYNC_ROOTS,
    shape: sandboxShape,
    defaultTtlMs: (config) => config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS,
    defaultTimeoutMs: (config) => config.timeoutMs,
    egress: { fromConfig: (config) => ({ allowFqdns: config.egressAllowFqdns, allowCidrs: config.egressAllowCidrs }) },
    validate: (config) => {
      const problem = checkSocketPathLength(stateDirOf(config));
      return problem ? { errors: [problem] } : {};
    },
    probe: (config) => probeBubblewrap(config, { bwrapPath, supervisorScript, nodeBinary }),

    async create({ config, labels, expiresAt, grant, reusable, created }) {
      if (!bwrapPath) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
      const socketProblem = checkSocketPathLength(stateDirOf(config));
      if (socketProblem) throw new Error(socketProblem);
      if (config.rootfs && !fs.statSync(config.rootfs, { throwIfNoEntry: false })?.isDirectory()) {
        throw new Error(`rootfs ${config.rootfs} is not a directory (set "Root filesystem" to a directory holding the sandbox's tree)`);
      }
      const id = newLeaseId();
      created(id);
      const sandbox = await backendFor(config).create({
        id,
        rootfs: config.rootfs,
        limits: { cpu: config.cpu, memoryMb: config.memoryMb, pids: config.pids, diskMb: config.diskMb },
        expiresAt: expiresAt!.getTime(), // the kit always bounds it (defaultTtlMs)
        egress: grant,
        labels: { ...labels },
        metadata: { reuse: reusable },
      });
      return leaseOf(sandbox);
    },
    async get(ref) {
      const sandbox = isLeaseId(ref.providerLeaseId) ? await backendFor(ref.config).get(ref.providerLeaseId) : null;
      return sandbox ? leaseOf(sandbox) : null;
    },
    async destroy(ref) {
      if (isLeaseId(ref.providerLeaseId)) await backendFor(ref.config).destroy(ref.providerLeaseId);
    },
    stop: (lease) => lease.sandbox.stop(),
    start: async (lease) => {
      await lease.sandbox.start();
      return leaseOf(lease.sandbox);
    },
    alive: (lease) => lease.sandbox.state === "running",
    runner: (lease) => lease.sandbox.runner,
    // Read from the disk without following any link, also while the lease is stopped (a resume then
    // knows it may restart the jail before paying for it); written inside the jail.
    sentinel: {
      read: async (lease) => (await lease.sandbox.readStoredFile(SENTINEL_FILE, { maxBytes: 4096 }))?.toString("utf8") ?? null,
      write: async (lease, text) => {
        const roots = [SANDBOX_PATHS.workspace];
        await lease.sandbox.files.mkdir(path.posix.dirname(SENTINEL_FILE), { mode: 0o700, roots });
        await lease.sandbox.files.write(SENTINEL_FILE, text, { mode: 0o600, createParents: false, roots });
      },
    },
    annotateStderr: (lease) => annotate(lease.sandbox),
    async list(config, labels) {
      const found = await backendFor(config).list({ labels });
      return found.filter((s) => isLeaseId(s.id)).map((s) => ({ providerLeaseId: s.id, labels: { ...s.labels }, ownerAlive: s.ownerAlive }));
    },
    // Jails outlive the worker on purpose (the next worker adopts them); only local handles go.
    async shutdown() {
      await Promise.all([...backends.values()].map((backend) => backend.close()));
      backends.clear();
    },
  });
}

export const createBubblewrapPlugin = (deps: BubblewrapPluginDeps = {}) => createBubblewrapProvider(deps).plugin;

export default createBubblewrapPlugin();
