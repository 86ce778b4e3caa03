import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";
import { deriveSandboxCapabilities, supportsLoginPty } from "../provider/capabilities.js";
import { templateManifestFlags, type TemplateContract } from "../provider/template-contract.js";
import type { TransportCapabilities } from "../transport.js";

type DriverDeclaration = NonNullable<PaperclipPluginManifestV1["environmentDrivers"]>[number];

/**
 * What the provider's definition declares, so the manifest derives `sandboxCapabilities` exactly as
 * `defineSandboxProvider` does (the manifest module must not import the plugin and its vendor SDK).
 */
export interface DeclaredProviderShape {
  transport: TransportCapabilities;
  /** The definition declares `keep` (reusable leases). */
  keepsLeases: boolean;
  concurrentSync?: boolean;
  /** The definition declares `templates` (custom images) with this contract. */
  templates?: TemplateContract;
  /**
   * The runner is wrapped in `withCommandChannel` (one in-sandbox multiplexer per lease; the probe
   * reports `PROBE_COMMAND_CHANNEL`). Not a host capability, so it stays out of the manifest; the
   * root README's feature grid reads it.
   */
  commandChannel?: boolean;
}

export interface SandboxProviderManifestInput {
  /** Plugin id, e.g. `paperclip-sandbox.bubblewrap`. */
  id: string;
  version: string;
  displayName: string;
  description: string;
  /** The driver this plugin registers; `config.provider` of a `driver: "sandbox"` environment names it. */
  driver: Omit<DriverDeclaration, "kind"> & { configSchema: Record<string, unknown> };
  /** When given, `sandboxCapabilities` and `supportsReusableLeases` are derived from it. */
  shape?: DeclaredProviderShape;
}

/**
 * The manifest of a sandbox-provider plugin: one `sandbox_provider` driver, the one capability the
 * host requires for it, and the worker entry every package in this repo builds to.
 */
export function defineSandboxProviderManifest(input: SandboxProviderManifestInput): PaperclipPluginManifestV1 {
  return {
    id: input.id,
    apiVersion: 1,
    version: input.version,
    displayName: input.displayName,
    description: input.description,
    author: "Paperclip sandbox providers",
    categories: ["workspace"],
    capabilities: ["environment.drivers.register"],
    entrypoints: { worker: "./dist/worker.js" },
    environmentDrivers: [{ ...input.driver, ...(input.shape ? derivedFlags(input.shape) : {}), kind: "sandbox_provider" }],
  };
}

function derivedFlags(shape: DeclaredProviderShape): Partial<DriverDeclaration> {
  const sandboxCapabilities = deriveSandboxCapabilities({ transport: shape.transport, keepsLeases: shape.keepsLeases, concurrentSync: shape.concurrentSync ?? true });
  return {
    sandboxCapabilities,
    supportsReusableLeases: sandboxCapabilities.reusableLeases,
    supportsLoginPty: supportsLoginPty(shape.transport),
    ...(shape.templates ? templateManifestFlags(shape.templates) : {}),
  };
}
