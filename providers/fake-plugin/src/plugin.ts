import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createLocalScriptRunner, defineSandboxProvider, endMarkedProcesses, probeResult, type SandboxHandle, type ScriptRunner } from "@paperclip-sandbox/kit";
import { fakeConfig, type FakeConfig } from "./config.js";
import { FAKE_DRIVER_KEY, FAKE_SHAPE } from "./manifest.js";
import { FakeLeaseStore, type FakeLeasePaths, type FakeLeaseRecord } from "./lease-store.js";

export interface FakePluginDeps {
  /** Where lease directories live; default `<os tmpdir>/paperclip-fake-plugin-<uid>` (one per user: a 0700 dir of another user is unusable). */
  baseDir?: string;
  now?: () => Date;
}

/** A fixed PATH so results do not depend on the worker's environment. */
const STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/**
 * Every command of a lease carries this marker, so any worker (after a crash or restart too) can find
 * and end the lease's processes, `setsid`/`nohup` children included.
 */
const LEASE_MARKER = "PAPERCLIP_FAKE_PLUGIN_LEASE";

interface FakeHandle extends SandboxHandle {
  record: FakeLeaseRecord;
  paths: FakeLeasePaths;
}

export function createFakePlugin(deps: FakePluginDeps = {}) {
  const store = new FakeLeaseStore(deps.baseDir ?? join(tmpdir(), `paperclip-fake-plugin-${process.getuid?.() ?? "user"}`));
  const now = deps.now ?? (() => new Date());
  // Past its expiry by this provider's clock (tests move it): ended, for the kit to destroy.
  const handleOf = (record: FakeLeaseRecord, paths: FakeLeasePaths): FakeHandle => ({
    providerLeaseId: record.providerLeaseId,
    ...(record.expiresAt !== null && Date.parse(record.expiresAt) <= now().getTime() ? { state: "ended" as const } : {}),
    expiresAt: record.expiresAt === null ? null : new Date(record.expiresAt),
    labels: record.labels,
    record,
    paths,
  });

  const runnerFor = (handle: FakeHandle, config: FakeConfig): ScriptRunner => {
    const local = createLocalScriptRunner({
      cwd: handle.paths.workspace,
      env: { PATH: STANDARD_PATH, HOME: handle.paths.home, TMPDIR: handle.paths.tmp, LANG: "C.UTF-8", [LEASE_MARKER]: handle.providerLeaseId },
    });
    const failure = config.executeFailure;
    if (!failure) return local;
    return { capabilities: local.capabilities, run: () => Promise.reject(new Error(`fake-plugin execute failed (injected): ${failure}`)) };
  };

  return defineSandboxProvider({
    driverKey: FAKE_DRIVER_KEY,
    config: fakeConfig,
    transport: FAKE_SHAPE.transport,
    workspace: { existing: (handle: FakeHandle) => handle.paths.workspace, syncRoots: (handle) => [handle.paths.leaseDir] },
    shape: (config) => ({ image: config.image }),
    options: { commandTimeoutMs: (config) => config.timeoutMs },
    keep: { reusable: (config) => config.reuseLease, by: "stop" },
    leaseMetadata: (handle) => ({ leaseDir: handle.paths.leaseDir, image: handle.record.image }),

    async create({ config, params, labels, expiresAt, fingerprint, reusable, created }) {
      if (config.acquireDelayMs) await sleep(config.acquireDelayMs);
      if (config.acquireFailure) throw new Error(`fake-plugin acquire failed (injected): ${config.acquireFailure}`);
      const record: FakeLeaseRecord = {
        version: 1,
        providerLeaseId: FakeLeaseStore.newLeaseId(),
        companyId: params.companyId,
        environmentId: params.environmentId,
        labels: { ...labels },
        fingerprint,
        reusable,
        image: config.image,
        createdAt: now().toISOString(),
        expiresAt: expiresAt?.toISOString() ?? null,
      };
      created(record.providerLeaseId);
      const paths = await store.create(record);
      if (config.acquireFailureAfterCreate) throw new Error(`fake-plugin acquire failed after create (injected): ${config.acquireFailureAfterCreate}`);
      return handleOf(record, paths);
    },
    async get(ref) {
      const found = await store.load(ref.providerLeaseId);
      return found ? handleOf(found.record, found.paths) : null;
    },
    async destroy(_ref, handle) {
      await endMarkedProcesses(LEASE_MARKER, handle.providerLeaseId);
      await store.remove(handle.providerLeaseId);
    },
    // A kept lease keeps its directory; its processes end as a stopped sandbox's would.
    stop: (handle) => endMarkedProcesses(LEASE_MARKER, handle.providerLeaseId).then(() => undefined),
    runner: runnerFor,

    async probe(config) {
      if (config.probeFailure) {
        return probeResult("fake-plugin sandbox", [{ severity: "error", message: config.probeFailure, code: "FAKE_PROBE_FAILURE", brief: `probe failed (injected): ${config.probeFailure}` }]);
      }
      return probeResult("fake-plugin sandbox", [
        {
          severity: "warning",
          message: "No isolation: commands run on the worker's host as its user.",
          code: "FAKE_NO_ISOLATION",
          brief: "NO isolation: commands run on the worker's host as its user",
        },
      ]);
    },
  }).plugin;
}

export default createFakePlugin();
