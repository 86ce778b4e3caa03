export { defineSandboxProvider, type SandboxProvider } from "./define.js";
export type {
  SandboxProviderDefinition,
  SandboxHandle,
  LeaseRef,
  CreateInput,
  HookContext,
  WorkspaceDeclaration,
  KeepDeclaration,
  KeepMode,
  ProviderOptions,
  ListContext,
} from "./types.js";
export { LeaseGoneError, AcquireBudgetError, secretValuesOf } from "./errors.js";
export { deriveSandboxCapabilities, supportsDuplex, type DerivedSandboxCapabilities } from "./capabilities.js";
