export { checkAll } from "./check.js";
export { formatChecksums, sha256File } from "./checksums.js";
export { importedPackages, packageOfSpecifier } from "./imports.js";
export { cleanNpmEnv, npm, npmPack, type PackResult, type PackedFile } from "./npm.js";
export { CHECKSUMS_FILE, INDEX_FILE, packNormalized, readReleaseIndex, releasePack, type PackedPackage, type ReleasePackOptions } from "./pack.js";
export { compareChecksumLists } from "./reproducible.js";
export * from "./rules.js";
export { inDependencyOrder, listWorkspacePackages, publicPackages, readManifest, type PackageManifest, type WorkspacePackage } from "./workspace.js";
