import type { PluginEnvironmentTemplateRefKind } from "@paperclipai/plugin-sdk";

/**
 * What a provider declares about custom images (the host's interactive setup and template capture),
 * statically: the manifest module states it without importing the plugin (see
 * scripts/e2e-paperclip/HOST-CALLS.md "Custom images").
 */
export interface TemplateContract {
  /** The manifest's `templateRefKind`: what a captured ref names. */
  refKind: PluginEnvironmentTemplateRefKind;
  /**
   * The config field the host writes a captured ref into for later runs (`templateConfigBinding.field`).
   * It must be a field of the provider's config schema, or those runs fail validation.
   */
  configField: string;
  /** Config fields the host removes when it applies the ref (`templateConfigBinding.unsetFields`). */
  unsetFields?: string[];
  /**
   * Config paths that scope where templates live (a state directory, an endpoint, an account): when
   * one changes on a saved environment, the host detaches its templates (`templateIdentityPaths`).
   */
  identityPaths: string[];
  /** Connection types a setup sandbox offers (`interactiveSetupConnectionTypes`); [] for none. */
  connectionTypes: string[];
  /** The provider deletes captured templates (`supportsTemplateDelete`). */
  deletes: boolean;
}

/** A config field name the host accepts as a binding (its own rule: an identifier, not `provider`). */
const BINDING_FIELD = /^[A-Za-z_][A-Za-z0-9_-]*$/;

/** The problems of a contract against the provider's config schema; [] when it is sound. */
export function templateContractProblems(contract: TemplateContract, jsonSchema: Record<string, unknown>): string[] {
  const properties = (jsonSchema.properties ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  for (const field of [contract.configField, ...(contract.unsetFields ?? [])]) {
    if (!BINDING_FIELD.test(field) || field === "provider") problems.push(`template config field "${field}" must be an identifier other than "provider"`);
  }
  if (!(contract.configField in properties)) problems.push(`template config field "${contract.configField}" is not a field of the config schema (runs started from a template would fail validation)`);
  if (contract.identityPaths.length > 20) problems.push("at most 20 template identity paths");
  for (const path of contract.identityPaths) {
    if (!path.split(".").every((segment) => BINDING_FIELD.test(segment))) problems.push(`template identity path "${path}" must be dot-separated identifiers`);
  }
  return problems;
}

/** The driver declaration's custom-image flags, from the contract. */
export function templateManifestFlags(contract: TemplateContract) {
  return {
    supportsInteractiveSetup: true,
    interactiveSetupConnectionTypes: [...contract.connectionTypes],
    supportsTemplateCapture: true,
    templateRefKind: contract.refKind,
    templateConfigBinding: { field: contract.configField, unsetFields: [...(contract.unsetFields ?? [])] },
    templateIdentityPaths: [...contract.identityPaths],
    supportsTemplateDelete: contract.deletes,
  };
}
