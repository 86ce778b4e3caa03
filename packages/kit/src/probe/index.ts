// One home for probes: the summary the host shows, coded checks, and the default create-run-destroy probe.
export { summarizeProbe, probeResult } from "./summary.js";
export { runProbeChecks, DEFAULT_PROBE_CHECK_TIMEOUT_MS } from "./checks.js";
export type { ProbeCheck, ProbeCheckOutcome, ProbeCheckStatus, ProbeChecksResult, ProbeChecksOptions } from "./checks.js";
export { defaultProbe } from "./default-probe.js";
export type { ProbeFinding } from "./summary.js";
