export const CONFORMANCE_CASE_NAMES = [
  "validate-good-config",
  "validate-bad-configs",
  "probe",
  "acquire",
  "realize-workspace",
  "execute-stdout-stderr",
  "execute-exit-codes",
  "execute-argument-quoting",
  "execute-env",
  "execute-cwd",
  "execute-stdin",
  "execute-live-output",
  "execute-timeout-ends-process-group",
  "background-process-survives",
  "sync-large-file-roundtrip",
  "sync-tree-modes-symlinks-excludes",
  "sync-single-file-mode",
  "sync-concurrent-operations",
  "duplex-channel",
  "release-receipt-after-execution",
  "resume-reusable-lease",
  "destroy-twice",
  "nothing-left-behind",
] as const;

export type ConformanceCaseName = (typeof CONFORMANCE_CASE_NAMES)[number];

/** What the suite knows about the run when it asks a provider for leftovers. */
export interface LeftoversContext {
  /** Every providerLeaseId the suite acquired (including resumed ones). */
  leaseIds: readonly string[];
  /** Every `metadata.remoteCwd` those leases reported. */
  remoteCwds: readonly string[];
}

export interface ConformanceOptions {
  name: string;
  pluginDir: string;
  driverKey: string;
  /** A valid config. */
  config: Record<string, unknown>;
  invalidConfigs: Array<{ config: Record<string, unknown>; error: RegExp }>;
  /** A valid config with `reuseLease: true`; absent skips the resume case. */
  reuseConfig?: Record<string, unknown>;
  /** Case -> reason printed in the output. */
  skip?: Partial<Record<ConformanceCaseName, string>>;
  workerEnv?: Record<string, string>;
  /** Provider-specific: what is still there (dirs, processes). `[]` is expected at the end. */
  leftovers?: (context: LeftoversContext) => Promise<string[]>;
}
