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
export { LeaseGoneError, AcquireBudgetError, StartBudgetError, secretValuesOf } from "./errors.js";
export { deriveSandboxCapabilities, supportsDuplex, supportsIncrementalSessionOutput, supportsLoginPty, type DerivedSandboxCapabilities } from "./capabilities.js";
export type { TemplateDeclaration, SetupConnection } from "./types.js";
export { templateContractProblems, templateManifestFlags, type TemplateContract } from "./template-contract.js";
export { TemplateRefError } from "./templates.js";
export { isDigestTemplateName, isOwnedTemplateName, ownedTemplateName, templateNameOwner } from "./template-names.js";
