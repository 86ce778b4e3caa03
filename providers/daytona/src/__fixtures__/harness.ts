// The daytona plugin in-process (its hooks called as the host calls them) against a Daytona
// emulator of its own, with the real SDK, plus an SDK client to look behind the provider's back.
import { Daytona } from "@daytonaio/sdk";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { hostFor } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, type DaytonaEmulatorOptions } from "@paperclip-sandbox/emulator-daytona";
import { createDaytonaPlugin, type DaytonaPluginDeps } from "../plugin.js";

export const scope = { driverKey: "daytona", companyId: "company-1", environmentId: "env-1" };
/** What a host run carries: with both ids a reuseLease config keeps its sandbox. */
export const runIdentity = { agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" };

export interface Harness {
  emu: RunningEmulator;
  sdk: Daytona;
  hooks: Required<ReturnType<typeof createDaytonaPlugin>["definition"]>;
  config: Record<string, unknown>;
  warnings: string[];
  acquire(config?: Record<string, unknown>, params?: Record<string, unknown>): Promise<PluginEnvironmentLease>;
  sh(lease: PluginEnvironmentLease, script: string, extra?: Record<string, unknown>): ReturnType<Harness["hooks"]["onEnvironmentExecute"]>;
  release(lease: PluginEnvironmentLease, config?: Record<string, unknown>, extra?: Record<string, unknown>): ReturnType<Harness["hooks"]["onEnvironmentReleaseLease"]>;
  destroy(lease: PluginEnvironmentLease, config?: Record<string, unknown>, extra?: Record<string, unknown>): ReturnType<Harness["hooks"]["onEnvironmentDestroyLease"]>;
  resume(lease: PluginEnvironmentLease, config?: Record<string, unknown>, extra?: Record<string, unknown>): ReturnType<Harness["hooks"]["onEnvironmentResumeLease"]>;
  /** Daytona's state of a sandbox, "gone" once deleted. */
  stateOf(id: string): Promise<string>;
  /** Vendor calls since `mark` as "METHOD route status". */
  calls(mark: number): Promise<string[]>;
  close(): Promise<void>;
}

export async function startHarness(options: DaytonaEmulatorOptions = {}, deps: DaytonaPluginDeps = {}): Promise<Harness> {
  const emu = await runEmulator(emulator, { options });
  const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, timeoutMs: 60_000 };
  const identity = { companyId: scope.companyId, environmentId: scope.environmentId, agentId: runIdentity.agentId, executionWorkspaceId: runIdentity.executionWorkspaceId };
  const host = hostFor(createDaytonaPlugin({ env: {}, ...deps }), config, { driverKey: scope.driverKey, identity });
  const hooks = (await host.hooks()) as Harness["hooks"];
  const sdk = new Daytona({ apiKey: emu.credentials.apiKey!, apiUrl: emu.url, useDeprecatedPolling: true });
  const as = (cfg?: Record<string, unknown>) => (cfg ? host.withConfig(cfg) : host);
  return {
    emu,
    sdk,
    hooks,
    config,
    warnings: host.warnings,
    acquire: (cfg, params = {}) => as(cfg).acquire({ adapterType: runIdentity.adapterType, ...params }),
    sh: (lease, script, { config: cfg, ...extra } = {}) => as(cfg as Record<string, unknown> | undefined).sh(lease, script, extra),
    release: (lease, cfg, extra) => as(cfg).release(lease, extra),
    destroy: (lease, cfg, extra) => as(cfg).destroy(lease, extra),
    resume: (lease, cfg, extra) => as(cfg).resume(lease, extra),
    async stateOf(id) {
      try {
        return (await sdk.get(id)).state ?? "unknown";
      } catch (error) {
        if ((error as { statusCode?: number }).statusCode === 404) return "gone";
        throw error;
      }
    },
    async calls(mark) {
      await emu.requests.idle();
      return emu.requests.list({ since: mark }).map((record) => `${record.method} ${record.route} ${record.status}`);
    },
    close: () => emu.close(),
  };
}

export const waitFor = async (what: string, check: () => Promise<boolean>, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};
