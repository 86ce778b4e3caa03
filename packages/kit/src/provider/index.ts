export { defineSandboxProvider, type SandboxProvider } from "./define.js";
export type { SandboxProviderDefinition, SandboxHandle, LeaseRef, CreateInput, HookContext, ListedResource } from "./types.js";
export { LeaseGoneError, AcquireBudgetError } from "./errors.js";
export { deriveSandboxCapabilities, supportsDuplex, type DerivedSandboxCapabilities } from "./capabilities.js";
export { defaultProbe } from "./probe.js";
