export { defineSandboxProviderManifest, type SandboxProviderManifestInput, type DeclaredProviderShape } from "./manifest.js";
export { execRequestFrom } from "./exec-request.js";
export { packageVersionOf } from "./package-version.js";
