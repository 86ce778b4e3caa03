export { defineSandboxProviderManifest, type SandboxProviderManifestInput } from "./manifest.js";
export { execRequestFrom } from "./exec-request.js";
