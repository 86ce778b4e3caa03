import type {
  PluginEnvironmentAcquireLeaseParams,
  PluginEnvironmentDestroyLeaseParams,
  PluginEnvironmentExecuteParams,
  PluginEnvironmentExecuteResult,
  PluginEnvironmentLease,
  PluginEnvironmentProbeParams,
  PluginEnvironmentProbeResult,
  PluginEnvironmentRealizeWorkspaceParams,
  PluginEnvironmentRealizeWorkspaceResult,
  PluginEnvironmentReleaseLeaseParams,
  PluginEnvironmentResumeLeaseParams,
  PluginEnvironmentSyncInParams,
  PluginEnvironmentSyncOutParams,
  PluginEnvironmentSyncResult,
  PluginEnvironmentTerminationReceipt,
  PluginEnvironmentValidateConfigParams,
  PluginEnvironmentValidationResult,
} from "@paperclipai/plugin-sdk";

export interface CallOptions {
  /** Overrides the host-default timeout for this call. */
  timeoutMs?: number;
  /** Receives this call's `execute.log` chunks, in order, while the call runs. */
  onLog?: (stream: "stdout" | "stderr", chunk: string) => void;
  /** The invocation id to send; a fresh UUID when absent. */
  invocationId?: string;
}

export type CallFn = <T = unknown>(method: string, params: unknown, opts?: CallOptions) => Promise<T>;

/** The environment-driver hooks under their SDK types; each maps to its `environment*` RPC method. */
export interface EnvironmentMethods {
  validateConfig(p: PluginEnvironmentValidateConfigParams, o?: CallOptions): Promise<PluginEnvironmentValidationResult>;
  probe(p: PluginEnvironmentProbeParams, o?: CallOptions): Promise<PluginEnvironmentProbeResult>;
  acquireLease(p: PluginEnvironmentAcquireLeaseParams, o?: CallOptions): Promise<PluginEnvironmentLease>;
  resumeLease(p: PluginEnvironmentResumeLeaseParams, o?: CallOptions): Promise<PluginEnvironmentLease>;
  releaseLease(p: PluginEnvironmentReleaseLeaseParams, o?: CallOptions): Promise<PluginEnvironmentTerminationReceipt | null>;
  destroyLease(p: PluginEnvironmentDestroyLeaseParams, o?: CallOptions): Promise<PluginEnvironmentTerminationReceipt | null>;
  realizeWorkspace(p: PluginEnvironmentRealizeWorkspaceParams, o?: CallOptions): Promise<PluginEnvironmentRealizeWorkspaceResult>;
  execute(p: PluginEnvironmentExecuteParams, o?: CallOptions): Promise<PluginEnvironmentExecuteResult>;
  syncIn(p: PluginEnvironmentSyncInParams, o?: CallOptions): Promise<PluginEnvironmentSyncResult>;
  syncOut(p: PluginEnvironmentSyncOutParams, o?: CallOptions): Promise<PluginEnvironmentSyncResult>;
}

export const ENVIRONMENT_METHOD_NAMES = {
  validateConfig: "environmentValidateConfig",
  probe: "environmentProbe",
  acquireLease: "environmentAcquireLease",
  resumeLease: "environmentResumeLease",
  releaseLease: "environmentReleaseLease",
  destroyLease: "environmentDestroyLease",
  realizeWorkspace: "environmentRealizeWorkspace",
  execute: "environmentExecute",
  syncIn: "environmentSyncIn",
  syncOut: "environmentSyncOut",
} as const satisfies Record<keyof EnvironmentMethods, string>;

export function environmentMethods(call: CallFn): EnvironmentMethods {
  const bind =
    <P, R>(method: string) =>
    (params: P, opts?: CallOptions) =>
      call<R>(method, params, opts);
  const n = ENVIRONMENT_METHOD_NAMES;
  return {
    validateConfig: bind(n.validateConfig),
    probe: bind(n.probe),
    acquireLease: bind(n.acquireLease),
    resumeLease: bind(n.resumeLease),
    releaseLease: bind(n.releaseLease),
    destroyLease: bind(n.destroyLease),
    realizeWorkspace: bind(n.realizeWorkspace),
    execute: bind(n.execute),
    syncIn: bind(n.syncIn),
    syncOut: bind(n.syncOut),
  };
}
