// hostFor: the calls a provider test makes carry what the real host sends (HOST-CALLS.md §1).
import { describe, expect, it } from "vitest";
import { definePlugin, type PluginContext } from "@paperclipai/plugin-sdk";
import { configAfterAcquire, hostFor } from "./host-for.js";

function recordingPlugin() {
  const calls: Array<[string, Record<string, unknown>]> = [];
  let setups = 0;
  let shutdowns = 0;
  const keep = (name: string) => async (params: Record<string, unknown>) => {
    calls.push([name, params]);
    return { providerLeaseId: "lease-1", metadata: { remoteCwd: "/work/here" } };
  };
  const plugin = definePlugin({
    async setup(ctx: PluginContext) {
      setups += 1;
      ctx.logger.warn("set up");
    },
    async onShutdown() {
      shutdowns += 1;
    },
    onEnvironmentAcquireLease: keep("acquire"),
    onEnvironmentResumeLease: keep("resume"),
    onEnvironmentReleaseLease: async (params: unknown) => void calls.push(["release", params as Record<string, unknown>]),
    onEnvironmentExecute: async (params: unknown) => {
      calls.push(["execute", params as Record<string, unknown>]);
      return { exitCode: 0, signal: null, timedOut: false, stdout: "", stderr: "" };
    },
  } as unknown as Parameters<typeof definePlugin>[0]);
  return { plugin, calls, setups: () => setups, shutdowns: () => shutdowns };
}

describe("hostFor", () => {
  it("sets a plugin up once, and every call carries the host's identity and config", async () => {
    const worker = recordingPlugin();
    const host = hostFor(worker.plugin, { image: "alpine" }, { driverKey: "demo" });
    const lease = await host.acquire();
    await host.sh(lease, "echo hi");
    await host.release(lease);
    expect(worker.setups()).toBe(1);
    expect(host.warnings).toEqual(["set up"]);
    const [acquire, execute, release] = worker.calls.map(([, params]) => params);
    const scope = { driverKey: "demo", companyId: host.identity.companyId, environmentId: host.identity.environmentId, config: { image: "alpine" } };
    expect(acquire).toMatchObject({ ...scope, agentId: host.identity.agentId, executionWorkspaceId: host.identity.executionWorkspaceId });
    expect(acquire!.runId).toMatch(/^run-/);
    expect(execute).toMatchObject({ ...scope, command: "sh", args: ["-c", "echo hi"], cwd: "/work/here", lease: { providerLeaseId: "lease-1" } });
    expect(release).toMatchObject({ ...scope, providerLeaseId: "lease-1", leaseMetadata: { remoteCwd: "/work/here" } });
  });

  it("gives each acquire its own run, and each host its own identity", async () => {
    const worker = recordingPlugin();
    const host = hostFor(worker.plugin, {}, { driverKey: "demo" });
    await host.acquire();
    await host.acquire();
    const [first, second] = worker.calls.map(([, params]) => params.runId);
    expect(first).not.toBe(second);
    expect(hostFor(worker.plugin, {}, { driverKey: "demo" }).identity.companyId).not.toBe(host.identity.companyId);
  });

  it("keeps identity and config on another worker, and shuts down only a worker it set up", async () => {
    const before = recordingPlugin();
    const after = recordingPlugin();
    const host = hostFor(before.plugin, { reuseLease: true }, { driverKey: "demo" });
    const lease = await host.acquire();
    const restarted = host.withPlugin(after.plugin);
    await restarted.resume(lease);
    expect(after.calls[0]![1]).toMatchObject({ companyId: host.identity.companyId, config: { reuseLease: true }, providerLeaseId: "lease-1" });
    await host.shutdown();
    await hostFor(recordingPlugin().plugin, {}, { driverKey: "demo" }).shutdown();
    expect(before.shutdowns()).toBe(1);
    expect(host.withConfig({ image: "x" }).config).toEqual({ reuseLease: true, image: "x" });
  });

  it("after acquire, sends the config merged with the lease's metadata, host-internal keys stripped (HOST-CALLS.md §1)", async () => {
    expect(configAfterAcquire({ image: "alpine", timeoutMs: 5 }, { remoteCwd: "/w", fingerprint: "f1", timeoutMs: 9, shellCommand: "sh" })).toEqual({
      image: "alpine",
      timeoutMs: 9,
      fingerprint: "f1",
    });
    const worker = recordingPlugin();
    const host = hostFor(worker.plugin, { image: "alpine" }, { driverKey: "demo" });
    const lease = await host.acquire();
    await host.sh({ ...lease, metadata: { ...lease.metadata, reusable: true } }, "true");
    expect(worker.calls[0]![1].config).toEqual({ image: "alpine" });
    expect(worker.calls[1]![1].config).toEqual({ image: "alpine", reusable: true });
  });
});
