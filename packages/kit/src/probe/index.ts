export { summarizeProbe, probeResult } from "./summary.js";
export type { ProbeFinding } from "./summary.js";
