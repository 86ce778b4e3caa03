import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { loadPluginPackage, startWorker } from "@paperclip-sandbox/worker-client";

/**
 * What Paperclip does between two runs of a reusable lease (HOST-CALLS.md §1, §5): the run's
 * workspace upload empties the workspace but for `.paperclip-runtime`, a file outside the workspace
 * stays, the lease is released (kept), and the next run resumes it. Returns both lease ids and what
 * the resumed sandbox still has outside the workspace.
 */
export async function reuseAcrossHostRuns(config: Record<string, unknown>): Promise<{ first: string; resumed: string | null; marker: string }> {
  const worker = await startWorker(await loadPluginPackage(fileURLToPath(new URL("../..", import.meta.url))));
  const ids = { companyId: `company-${randomUUID().slice(0, 8)}`, environmentId: `environment-${randomUUID().slice(0, 8)}` };
  const base = { driverKey: "cloudflare", ...ids, issueId: "issue-1", config: { ...config, reuseLease: true, keepAlive: true } };
  try {
    const lease = await worker.env.acquireLease({ ...base, runId: `run-${randomUUID()}`, agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" });
    const ws = String(lease.metadata?.remoteCwd);
    const upload = `mkdir -p "$1/.paperclip-runtime/claude" && echo kept > "$HOME/.e2e-marker" && find "$1" -mindepth 1 -maxdepth 1 ! -name .paperclip-runtime ! -name '.paperclip-upload-*' -exec rm -rf -- {} +`;
    await worker.env.execute({ ...base, lease, command: "sh", args: ["-c", upload, "sh", ws] });
    await worker.env.releaseLease({ ...base, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata ?? {} });
    const resumed = await worker.env.resumeLease({ ...base, providerLeaseId: lease.providerLeaseId!, leaseMetadata: lease.metadata ?? {} });
    let marker = "";
    if (resumed.providerLeaseId) {
      marker = (await worker.env.execute({ ...base, lease: resumed, command: "sh", args: ["-c", 'cat "$HOME/.e2e-marker"'] })).stdout.trim();
    }
    await worker.env.destroyLease({ ...base, providerLeaseId: (resumed.providerLeaseId ?? lease.providerLeaseId)!, leaseMetadata: lease.metadata ?? {} }).catch(() => undefined);
    return { first: lease.providerLeaseId!, resumed: resumed.providerLeaseId, marker };
  } finally {
    await worker.shutdown();
  }
}
