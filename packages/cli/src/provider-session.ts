import { startWorker, type CallOptions, type WorkerClient } from "@paperclip-sandbox/worker-client";
import type {
  PluginEnvironmentExecuteParams,
  PluginEnvironmentExecuteResult,
  PluginEnvironmentLease,
  PluginEnvironmentProbeResult,
  PluginEnvironmentRealizeWorkspaceResult,
  PluginEnvironmentSyncResult,
  PluginEnvironmentTerminationReceipt,
  PluginEnvironmentValidationResult,
  PluginSyncOperation,
} from "@paperclipai/plugin-sdk";
import { CliFailure, describeError } from "./errors.js";
import type { LoadedProvider } from "./provider-loader.js";
import type { ProviderConfig } from "./config-loader.js";
import type { SecretRedactor } from "@paperclip-sandbox/kit";

export const CLI_COMPANY_ID = "paperclip-sandbox-cli";
/** The CLI acts as one agent; a kept lease (like the host's) is matched by agent and execution workspace. */
const CLI_AGENT_ID = "paperclip-sandbox-cli";

export interface SessionOptions {
  config: ProviderConfig;
  environmentId: string;
  redactor: SecretRedactor;
  /** Forward the worker's stderr (redacted) to ours. */
  verbose?: boolean;
  stderr?: (text: string) => void;
  /** Added to the worker's scrubbed environment (e.g. a vendor emulator's URL and credential variables). */
  workerEnv?: Record<string, string>;
}

/**
 * One running plugin worker plus the base params every driver hook gets
 * (driverKey, companyId, environmentId, config).
 */
export class ProviderSession {
  readonly provider: LoadedProvider;
  readonly client: WorkerClient;
  readonly environmentId: string;
  config: ProviderConfig;

  private constructor(provider: LoadedProvider, client: WorkerClient, options: SessionOptions) {
    this.provider = provider;
    this.client = client;
    this.environmentId = options.environmentId;
    this.config = options.config;
  }

  static async start(provider: LoadedProvider, options: SessionOptions): Promise<ProviderSession> {
    const write = options.stderr ?? ((text: string) => process.stderr.write(text));
    let client: WorkerClient;
    try {
      client = await startWorker(provider.pkg, {
        env: options.workerEnv,
        onStderr: options.verbose ? (line) => write(`[worker] ${options.redactor.redact(line)}\n`) : undefined,
      });
    } catch (error) {
      throw new CliFailure(`cannot start the ${provider.driverKey} worker: ${options.redactor.redact(describeError(error))}`);
    }
    return new ProviderSession(provider, client, options);
  }

  get driverKey(): string {
    return this.provider.driverKey;
  }

  private base() {
    return { driverKey: this.driverKey, companyId: CLI_COMPANY_ID, environmentId: this.environmentId, config: this.config };
  }

  supports(method: string): boolean {
    return this.client.supportedMethods.includes(method);
  }

  validateConfig(): Promise<PluginEnvironmentValidationResult> {
    return this.client.env.validateConfig({ driverKey: this.driverKey, config: this.config });
  }

  probe(): Promise<PluginEnvironmentProbeResult> {
    return this.client.env.probe(this.base());
  }

  acquire(runId: string, extra: { requestedCwd?: string } = {}): Promise<PluginEnvironmentLease> {
    // The environment stands for the workspace the CLI runs in, as the host's execution workspace does.
    return this.client.env.acquireLease({ ...this.base(), runId, agentId: CLI_AGENT_ID, executionWorkspaceId: this.environmentId, ...extra });
  }

  resume(providerLeaseId: string, leaseMetadata?: Record<string, unknown>): Promise<PluginEnvironmentLease> {
    return this.client.env.resumeLease({ ...this.base(), providerLeaseId, leaseMetadata });
  }

  release(lease: PluginEnvironmentLease, cancelActiveWork = false, opts?: CallOptions): Promise<PluginEnvironmentTerminationReceipt | null> {
    return this.client.env.releaseLease({ ...this.base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata, cancelActiveWork }, opts);
  }

  destroy(lease: PluginEnvironmentLease, opts?: CallOptions): Promise<PluginEnvironmentTerminationReceipt | null> {
    return this.client.env.destroyLease({ ...this.base(), providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata, cancelActiveWork: true }, opts);
  }

  realizeWorkspace(lease: PluginEnvironmentLease, workspace: { localPath?: string; remotePath?: string; mode?: string }): Promise<PluginEnvironmentRealizeWorkspaceResult> {
    return this.client.env.realizeWorkspace({ ...this.base(), lease, workspace });
  }

  execute(
    lease: PluginEnvironmentLease,
    command: Omit<PluginEnvironmentExecuteParams, keyof ReturnType<ProviderSession["base"]> | "lease">,
    opts?: CallOptions,
  ): Promise<PluginEnvironmentExecuteResult> {
    return this.client.env.execute({ ...this.base(), lease, ...command }, opts);
  }

  syncIn(lease: PluginEnvironmentLease, operations: PluginSyncOperation[], opts?: CallOptions): Promise<PluginEnvironmentSyncResult> {
    return this.client.env.syncIn({ ...this.base(), lease, operations }, opts);
  }

  syncOut(lease: PluginEnvironmentLease, operations: PluginSyncOperation[], opts?: CallOptions): Promise<PluginEnvironmentSyncResult> {
    return this.client.env.syncOut({ ...this.base(), lease, operations }, opts);
  }

  /** Asks the worker to stop; kills it if it does not within `graceMs`. */
  async close(graceMs = 3_000): Promise<void> {
    await this.client.shutdown({ graceMs }).catch(() => this.client.kill("SIGKILL"));
  }
}
