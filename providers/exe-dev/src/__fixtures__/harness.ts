// The exe-dev plugin in-process (its hooks called as the host calls them) against an exe.dev
// emulator of its own, over the emulator's plain-http endpoint (the TLS path is the conformance
// suite's), with a private runtime directory for the worker's SSH state.
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PluginContext, PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
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
  const { definition } = createExeDevPlugin({ env: {}, runtimeParent, ...deps });
  const warnings: string[] = [];
  const quiet = () => undefined;
  await definition.setup({ logger: { warn: (message: string) => warnings.push(message), info: quiet, error: quiet, debug: quiet }, execution: { log: quiet } } as unknown as PluginContext);
  const hooks = definition as Hooks;
  const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.endpoints.http!, sshPrivateKey: emu.credentials.sshPrivateKey!, timeoutMs: 60_000 };
  const merged = (extra: Record<string, unknown> = {}) => ({ ...config, ...extra });
  const ref = (lease: PluginEnvironmentLease, cfg?: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    ...scope,
    config: merged(cfg),
    providerLeaseId: lease.providerLeaseId!,
    leaseMetadata: lease.metadata,
    ...extra,
  });
  return {
    emu,
    hooks,
    config,
    warnings,
    runtimeParent,
    acquire: (cfg, params = {}) => hooks.onEnvironmentAcquireLease({ ...scope, config: merged(cfg), runId: `run-${randomUUID()}`, ...params }),
    sh: (lease, script, { config: cfg, ...extra } = {}) =>
      hooks.onEnvironmentExecute({
        ...scope,
        config: merged(cfg as Record<string, unknown> | undefined),
        lease,
        command: "sh",
        args: ["-c", script],
        cwd: lease.metadata?.remoteCwd as string,
        ...extra,
      }),
    release: (lease, cfg, extra) => hooks.onEnvironmentReleaseLease(ref(lease, cfg, extra)),
    destroy: (lease, cfg) => hooks.onEnvironmentDestroyLease(ref(lease, cfg)),
    resume: (lease, cfg) => hooks.onEnvironmentResumeLease(ref(lease, cfg)),
    async calls(mark) {
      await emu.requests.idle();
      return emu.requests.list({ since: mark, protocol: "http" }).map((record) => `${record.notes.command ?? record.path} ${record.status}`);
    },
    async close() {
      await definition.onShutdown?.();
      await emu.close();
      await rm(runtimeParent, { recursive: true, force: true });
    },
  };
}
