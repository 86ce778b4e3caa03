/**
 * Drives the built bubblewrap worker through the worker client, as the host would. Each harness
 * owns a fresh state directory and tears down every lease it acquired.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { PluginEnvironmentExecuteResult, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { loadPluginPackage, startWorker, type WorkerClient } from "@paperclip-sandbox/worker-client";

export const pluginDir = fileURLToPath(new URL("../..", import.meta.url));

export interface Harness {
  stateDir: string;
  client: WorkerClient;
  config: Record<string, unknown>;
  base(config?: Record<string, unknown>): { driverKey: string; companyId: string; environmentId: string; config: Record<string, unknown> };
  acquire(extra?: Record<string, unknown>, config?: Record<string, unknown>): Promise<PluginEnvironmentLease>;
  sh(lease: PluginEnvironmentLease, script: string, extra?: Record<string, unknown>): Promise<PluginEnvironmentExecuteResult>;
  release(lease: PluginEnvironmentLease, extra?: Record<string, unknown>): Promise<unknown>;
  /** Kills the worker (SIGKILL) and starts a fresh one on the same state dir. */
  restartWorker(signal?: NodeJS.Signals): Promise<void>;
  close(): Promise<void>;
}

export async function startHarness(options: { config?: Record<string, unknown>; env?: Record<string, string>; nodePath?: string } = {}): Promise<Harness> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), "bwrap-test-"));
  const pkg = await loadPluginPackage(pluginDir);
  const config = { stateDir, timeoutMs: 30_000, ...options.config };
  const leases = new Set<PluginEnvironmentLease>();
  const h: Harness = {
    stateDir,
    client: await startWorker(pkg, { env: options.env, nodePath: options.nodePath }),
    config,
    base: (cfg = config) => ({ driverKey: "bubblewrap", companyId: "company-test", environmentId: "environment-test", config: cfg }),
    async acquire(extra = {}, cfg = config) {
      const lease = await h.client.env.acquireLease({ ...h.base(cfg), runId: `run-${Date.now()}`, agentId: "agent-test", ...extra });
      leases.add(lease);
      return lease;
    },
    sh: (lease, script, extra = {}) => h.client.env.execute({ ...h.base(), lease, command: "sh", args: ["-c", script], ...extra }),
    async release(lease, extra = {}) {
      const receipt = await h.client.env.releaseLease({ ...h.base(), providerLeaseId: lease.providerLeaseId, ...extra });
      leases.delete(lease);
      return receipt;
    },
    async restartWorker(signal = "SIGKILL") {
      h.client.kill(signal);
      await h.client.exited;
      h.client = await startWorker(pkg, { env: options.env, nodePath: options.nodePath });
    },
    async close() {
      for (const lease of leases) {
        await h.client.env.destroyLease({ ...h.base(), providerLeaseId: lease.providerLeaseId }).catch(() => undefined);
      }
      await h.client.shutdown();
      fs.rmSync(stateDir, { recursive: true, force: true });
    },
  };
  return h;
}

/** Polls until `check` holds or the deadline passes; returns the last value. The default total is long: a wait ends once the check holds, so only a failing test pays it (a short one fails under load). */
export async function eventually<T>(read: () => Promise<T> | T, check: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let value = await read();
  while (!check(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    value = await read();
  }
  return value;
}

/** Host pids whose cmdline contains `needle` (zombies excluded). */
export function hostProcessesMatching(needle: string): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      // argv elements are NUL-separated: join them with spaces, as `ps` shows them.
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").includes(needle)) pids.push(Number(name));
    } catch {
      // gone or not ours
    }
  }
  return pids;
}
