import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { buildWorkerEnv } from "@paperclip-sandbox/worker-client";

/** One provider resource found by listing, whether or not the lease database knows it. */
export interface ListedLease {
  providerLeaseId: string;
  labels: Record<string, string>;
  /** The provider's own view: its owner (worker) is running. */
  ownerAlive: boolean;
  expired: boolean;
  createdAt: string | undefined;
}

/** A provider's optional "list my leases" export, adapted to one shape. */
export type LeaseLister = (config: Record<string, unknown>) => Promise<ListedLease[]>;

interface BubblewrapStyleSummary {
  leaseId: string;
  record?: { labels?: Record<string, string>; createdAt?: string } | null;
  ownerAlive?: boolean;
  expired?: boolean;
}

async function packageEntry(pluginDir: string): Promise<string | undefined> {
  try {
    const pkg = JSON.parse(await readFile(path.join(pluginDir, "package.json"), "utf8")) as {
      main?: string;
      exports?: Record<string, unknown> | string;
    };
    const dot = typeof pkg.exports === "string" ? pkg.exports : (pkg.exports?.["."] as { import?: string } | string | undefined);
    const rel = typeof dot === "string" ? dot : (dot?.import ?? pkg.main);
    return rel ? path.resolve(pluginDir, rel) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Finds a lister in the plugin package's main module. Supported convention (bubblewrap's):
 * `export function listLeases(stateDir?: string): Promise<Array<{leaseId, record: {labels, createdAt} | null, ownerAlive, expired}>>`,
 * called with the config's `stateDir`, else the plugin's `defaultStateDir(workerEnv)` when it
 * exports one (the state location as the worker, with its scrubbed environment, sees it). Returns undefined when the
 * plugin has none, so `gc` falls back to the lease database alone.
 */
export async function loadLeaseLister(pluginDir: string, pluginId: string): Promise<LeaseLister | undefined> {
  const entry = await packageEntry(pluginDir);
  if (!entry) return undefined;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const list = mod.listLeases;
  if (typeof list !== "function") return undefined;
  const defaultStateDir = mod.defaultStateDir;
  return async (config) => {
    // The worker runs with the host's scrubbed environment, so its default state location must be
    // computed from that environment, not from ours (e.g. XDG_STATE_HOME is not passed through).
    const stateDir =
      typeof config.stateDir === "string"
        ? config.stateDir
        : typeof defaultStateDir === "function"
          ? (defaultStateDir as (env: NodeJS.ProcessEnv) => string)(buildWorkerEnv(pluginId))
          : undefined;
    const summaries = (await (list as (stateDir?: string) => Promise<BubblewrapStyleSummary[]>)(stateDir)) ?? [];
    return summaries.map((s) => ({
      providerLeaseId: s.leaseId,
      labels: s.record?.labels ?? {},
      ownerAlive: s.ownerAlive === true,
      expired: s.expired === true,
      createdAt: s.record?.createdAt,
    }));
  };
}
