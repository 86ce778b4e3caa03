import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { isProviderLeaseLister, labelValue, type ProviderLeaseLister } from "@paperclip-sandbox/kit";
import { buildWorkerEnv } from "@paperclip-sandbox/worker-client";

/** How long one listing may take before gc gives up on it. */
export const LIST_TIMEOUT_MS = 60_000;

/** One provider resource found by listing, whether or not the lease database knows it. */
export interface ListedLease {
  providerLeaseId: string;
  labels: Record<string, string>;
  /** The provider's view: a worker still holds it (true), none does (false), or it cannot tell. */
  ownerAlive: boolean | undefined;
  /** The provider reports it expired (or its expiry has passed). */
  expired: boolean;
  createdAt: string | undefined;
  state?: string;
  metadata?: Record<string, unknown>;
}

/**
 * A provider's "list my leases" export, adapted to one shape.
 * - `contract`: the kit's `ProviderLeaseLister` (`defineLeaseLister`), called with the full driver
 *   config (credentials included); it answers from the vendor, by label.
 * - `state-dir`: the older bubblewrap-style `listLeases(stateDir)`, called with `config.stateDir`.
 */
export interface LeaseLister {
  kind: "contract" | "state-dir";
  list(config: Record<string, unknown>, options?: { signal?: AbortSignal; now?: Date }): Promise<ListedLease[]>;
}

interface StateDirSummary {
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
 * Finds a lister in the plugin package's main module (`listLeases`). Returns undefined when the
 * plugin has none, so `gc` falls back to the lease database alone.
 */
export async function loadLeaseLister(pluginDir: string, pluginId: string, driverKey: string): Promise<LeaseLister | undefined> {
  const entry = await packageEntry(pluginDir);
  if (!entry) return undefined;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(entry).href)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const list = mod.listLeases;
  if (isProviderLeaseLister(list)) return contractLister(list, pluginId, driverKey);
  if (typeof list === "function") return stateDirLister(list as (stateDir?: string) => Promise<StateDirSummary[]>, mod.defaultStateDir, pluginId);
  return undefined;
}

function contractLister(list: ProviderLeaseLister, pluginId: string, driverKey: string): LeaseLister {
  return {
    kind: "contract",
    async list(config, options = {}) {
      const now = (options.now ?? new Date()).getTime();
      // As the worker would see it: the host's scrubbed environment, not ours.
      const env = buildWorkerEnv(pluginId);
      const listed = await list(config, { env, matchLabels: { "paperclip-provider": labelValue(driverKey) }, signal: options.signal });
      if (!Array.isArray(listed)) throw new Error("listLeases returned something other than an array");
      return listed
        .filter((lease) => lease && typeof lease.providerLeaseId === "string" && lease.providerLeaseId !== "")
        .map((lease) => ({
          providerLeaseId: lease.providerLeaseId,
          labels: lease.labels && typeof lease.labels === "object" ? lease.labels : {},
          ownerAlive: typeof lease.ownerAlive === "boolean" ? lease.ownerAlive : undefined,
          expired: lease.state === "expired" || (typeof lease.expiresAt === "string" && Date.parse(lease.expiresAt) <= now),
          createdAt: lease.createdAt,
          state: lease.state,
          metadata: lease.metadata,
        }));
    },
  };
}

function stateDirLister(list: (stateDir?: string) => Promise<StateDirSummary[]>, defaultStateDir: unknown, pluginId: string): LeaseLister {
  return {
    kind: "state-dir",
    async list(config) {
      // The worker runs with the host's scrubbed environment, so its default state location must be
      // computed from that environment, not from ours (e.g. XDG_STATE_HOME is not passed through).
      const stateDir =
        typeof config.stateDir === "string" ? config.stateDir : typeof defaultStateDir === "function" ? (defaultStateDir as (env: NodeJS.ProcessEnv) => string)(buildWorkerEnv(pluginId)) : undefined;
      const summaries = (await list(stateDir)) ?? [];
      return summaries.map((s) => ({
        providerLeaseId: s.leaseId,
        labels: s.record?.labels ?? {},
        ownerAlive: s.ownerAlive === true,
        expired: s.expired === true,
        createdAt: s.record?.createdAt,
      }));
    },
  };
}
