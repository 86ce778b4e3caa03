// Runner-agnostic entry (no vitest import), e.g. for the CLI.
export { conformanceCases } from "./cases.js";
export { startConformanceWorld, type ConformanceWorld, type AcquiredLease, type ShellOptions } from "./world.js";
export {
  CONFORMANCE_CASE_NAMES,
  type ConformanceCaseName,
  type ConformanceOptions,
  type LeftoversContext,
} from "./options.js";
export type { ConformanceCase } from "./case.js";
export { ConformanceSkip } from "./skip.js";
export { findLocalLeftovers } from "./local-leftovers.js";
