import type { TransportCapabilities } from "../transport.js";

/** `sandboxCapabilities` of a manifest driver (the keys the host's strict schema accepts). */
export interface DerivedSandboxCapabilities {
  reusableLeases: boolean;
  nativeSyncIn: boolean;
  nativeSyncOut: boolean;
  concurrentSyncOperations: boolean;
  duplexCommandStream: boolean;
  incrementalSessionOutput: boolean;
  persistentProcessSessions: boolean;
  independentControlCommands: boolean;
}

/** True when duplex channels can run over this transport: a live byte pipe both ways. */
export function supportsDuplex(transport: TransportCapabilities): boolean {
  return transport.stdin === "stream" && transport.stdinEof && transport.binarySafe && transport.liveOutput;
}

/**
 * True when the host may stream a long-lived session command's output through `execute.log`
 * (`incrementalSessionOutput`, read by the ACPX engine) instead of polling its output files: the
 * transport delivers a running command's output while it runs. Conformance proves it
 * (`execute-live-output`, which a provider declaring this may not skip).
 */
export function supportsIncrementalSessionOutput(transport: TransportCapabilities): boolean {
  return transport.liveOutput;
}

/** True when the host's agent login can run here: the transport opens real pseudo-terminals. */
export function supportsLoginPty(transport: TransportCapabilities): boolean {
  return transport.pty === true;
}

/**
 * Capabilities follow from what the provider defines and what its transport can do, never typed
 * by hand: reuse needs a `keep` declaration, duplex needs a streamed, binary-safe transport with
 * live output, incremental session output needs live output. Native sync is always offered (the kit picks streaming, file-API or base64 by `syncFor`).
 * Sessions and control commands are offered by every transport (each execute stands alone).
 */
export function deriveSandboxCapabilities(input: { transport: TransportCapabilities; keepsLeases: boolean; concurrentSync: boolean }): DerivedSandboxCapabilities {
  return {
    reusableLeases: input.keepsLeases,
    nativeSyncIn: true,
    nativeSyncOut: true,
    concurrentSyncOperations: input.concurrentSync,
    duplexCommandStream: supportsDuplex(input.transport),
    incrementalSessionOutput: supportsIncrementalSessionOutput(input.transport),
    // Every execute is a command of its own (a vendor exec or a channel command), never queued
    // behind another: the host's long session command runs while its control commands come and go
    // (conformance: execute-control-command-beside-session-command). The host resolves both true
    // for any worker with environmentExecute; declared, they are claims the suite checks.
    persistentProcessSessions: true,
    independentControlCommands: true,
  };
}
