import type { PaperclipPluginManifestV1 } from "@paperclipai/plugin-sdk";

type DriverDeclaration = NonNullable<PaperclipPluginManifestV1["environmentDrivers"]>[number];

export interface SandboxProviderManifestInput {
  /** Plugin id, e.g. `paperclip-sandbox.bubblewrap`. */
  id: string;
  version: string;
  displayName: string;
  description: string;
  /** The driver this plugin registers; `config.provider` of a `driver: "sandbox"` environment names it. */
  driver: Omit<DriverDeclaration, "kind"> & { configSchema: Record<string, unknown> };
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
    environmentDrivers: [{ ...input.driver, kind: "sandbox_provider" }],
  };
}
