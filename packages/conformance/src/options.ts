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
  "execute-control-command-beside-session-command",
  "execute-timeout-ends-process-group",
  "background-process-survives",
  "background-child-holding-stdout",
  "sync-large-file-roundtrip",
  "sync-tree-modes-symlinks-excludes",
  "sync-single-file-mode",
  "sync-concurrent-operations",
  "sync-all-byte-values-roundtrip",
  "duplex-channel",
  "command-channel-multiplexer-killed",
  "command-channel-cut-before-hello",
  "command-channel-steady-command-no-vendor-call",
  "command-channel-flood-holds-no-other",
  "login-pty-session",
  "login-pty-bytes",
  "login-pty-exit-and-signals",
  "login-pty-session-home-checks",
  "template-setup-cancel",
  "template-capture-and-start",
  "template-delete",
  "template-setup-terminal",
  "release-receipt-after-execution",
  "release-receipt-ends-every-process",
  "resume-reusable-lease",
  "destroy-twice",
  "execute-after-destroy-fails-cleanly",
  "expiry-within-requested",
  "resource-labels",
  "probe-leaves-nothing",
  "declared-capabilities-match",
  "worker-restart-mid-lease",
  "failure-after-create-leaves-nothing",
  "transient-errors-retried",
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

/**
 * Failure injection for what hosted providers get wrong. An emulator-backed suite drives its
 * emulator's faults; a local provider may offer a config that fails on purpose. Absent: the case is
 * skipped with a reason.
 */
interface ConformanceFaults {
  /**
   * Arms a failure of the next acquire AFTER its sandbox exists (e.g. a 5xx on the first call that
   * follows the create). May return a config to acquire with instead (a provider's own fault switch).
   */
  failAfterCreate?(): Promise<Record<string, unknown> | void>;
  /** The next `count` vendor calls answer with this transient error (HTTP 429 with Retry-After, or 503). */
  transient?(kind: "429" | "503", count: number): Promise<void>;
  /** Disarms everything (called after each fault case). */
  reset?(): Promise<void>;
}

/** What the command-channel cases need from the provider's emulator; an absent hook skips its case. */
interface CommandChannelHooks {
  /**
   * Arms a cut of the next lease's channel stream after it starts, before the multiplexer's hello
   * (the acquire's first command waits for it). Returns how many streams have been cut since.
   */
  cutBeforeHello?(): Promise<() => number>;
  /** Starts counting vendor calls (running ones included, background keep-alives left out): the routes since, when called. */
  vendorCalls?(): () => Promise<string[]>;
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
  faults?: ConformanceFaults;
  /** Run with `workerEnv: {PAPERCLIP_SANDBOX_COMMAND_CHANNEL: "always"}`: the `command-channel-*` cases. */
  commandChannel?: CommandChannelHooks;
  /** The labels the provider's resource carries at the vendor (e.g. from its `listLeases`); absent skips `resource-labels`. */
  labelsOf?: (providerLeaseId: string, config: Record<string, unknown>) => Promise<Record<string, string> | undefined>;
  /** The provider cannot bound a sandbox at a requested deadline (it returns no expiry, so the host fails closed). */
  unboundedExpiry?: string;
}
