// The exe-dev plugin in-process (its hooks called as the host calls them) against an exe.dev
// emulator of its own, over the emulator's plain-http endpoint (the TLS path is the conformance
// suite's), with a private runtime directory for the worker's SSH state.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { hostFor } from "@paperclip-sandbox/conformance";
import { startExeDevEmulator, type ExeDevEmulatorOptions } from "@paperclip-sandbox/emulator-exe-dev";
import { createExeDevPlugin, type ExeDevPluginDeps } from "../plugin.js";

export const scope = { driverKey: "exe-dev", companyId: "company-1", environmentId: "env-1" };
/** What a host run carries: with both ids a reuseLease config keeps its VM. */
export const runIdentity = { agentId: "agent-1", executionWorkspaceId: "ws-1", adapterType: "claude_local" };

export type Emu = Awaited<ReturnType<typeof startExeDevEmulator>>;
type Hooks = Required<ReturnType<typeof createExeDevPlugin>["definition"]>;

export interface Harness {
  emu: Emu;
  hooks: Hooks;
  config: Record<string, unknown>;
  warnings: string[];
  runtimeParent: string;
  acquire(config?: Record<string, unknown>, params?: Record<string, unknown>): Promise<PluginEnvironmentLease>;
  sh(lease: PluginEnvironmentLease, script: string, extra?: Record<string, unknown>): ReturnType<Hooks["onEnvironmentExecute"]>;
  release(lease: PluginEnvironmentLease, config?: Record<string, unknown>, extra?: Record<string, unknown>): ReturnType<Hooks["onEnvironmentReleaseLease"]>;
  destroy(lease: PluginEnvironmentLease, config?: Record<string, unknown>): ReturnType<Hooks["onEnvironmentDestroyLease"]>;
  resume(lease: PluginEnvironmentLease, config?: Record<string, unknown>): ReturnType<Hooks["onEnvironmentResumeLease"]>;
  /** /exec commands since `mark`, e.g. "new 200". */
  calls(mark: number): Promise<string[]>;
  close(): Promise<void>;
}

export async function startHarness(options: ExeDevEmulatorOptions = {}, deps: ExeDevPluginDeps = {}): Promise<Harness> {
  const emu = await startExeDevEmulator(options);
  const runtimeParent = await mkdtemp(join(tmpdir(), "exe-rt-"));
  const plugin = createExeDevPlugin({ env: {}, runtimeParent, ...deps });
  const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.endpoints.http!, sshPrivateKey: emu.credentials.sshPrivateKey!, timeoutMs: 60_000 };
  const host = hostFor(plugin, config, { driverKey: scope.driverKey, identity: { companyId: scope.companyId, environmentId: scope.environmentId } });
  const hooks = (await host.hooks()) as Hooks;
  const as = (cfg?: Record<string, unknown>) => (cfg ? host.withConfig(cfg) : host);
  return {
    emu,
    hooks,
    config,
    warnings: host.warnings,
    runtimeParent,
    // As this harness always called it: a run without agent or execution workspace ids.
    acquire: (cfg, params = {}) => as(cfg).acquire({ agentId: undefined, executionWorkspaceId: undefined, ...params }),
    sh: (lease, script, { config: cfg, ...extra } = {}) => as(cfg as Record<string, unknown> | undefined).sh(lease, script, extra),
    release: (lease, cfg, extra) => as(cfg).release(lease, extra),
    destroy: (lease, cfg) => as(cfg).destroy(lease),
    resume: (lease, cfg) => as(cfg).resume(lease),
    async calls(mark) {
      await emu.requests.idle();
      return emu.requests.list({ since: mark, protocol: "http" }).map((record) => `${record.notes.command ?? record.path} ${record.status}`);
    },
    async close() {
      await host.shutdown();
      await emu.close();
      await rm(runtimeParent, { recursive: true, force: true });
    },
  };
}
