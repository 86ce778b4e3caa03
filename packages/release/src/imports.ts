import { builtinModules } from "node:module";

// `from "x"`, `import "x"`, `import("x")`, `require("x")` with a quoted literal: what tsc emits in
// .js and .d.ts files. Template-literal imports (computed names) are not dependencies by name.
// The keyword must stand alone (`--files-from", "` inside a string is not an import).
const SPECIFIER = /(?<![\w$.-])(?:from\s*|import\s*\(\s*|import\s+|require\s*\(\s*)(["'])([^"'\n]+)\1/g;
/** npm's package-name grammar: what a specifier's first segment(s) must be to name a package. */
const PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
const BUILTINS = new Set(builtinModules);

/** The package a bare specifier names (`@a/b/c` -> `@a/b`, `tar/x` -> `tar`); none for a relative path, URL or builtin. */
export function packageOfSpecifier(specifier: string): string | undefined {
  if (specifier.startsWith(".") || specifier.startsWith("/") || /^[a-z][a-z0-9+.-]*:/i.test(specifier)) return undefined;
  const parts = specifier.split("/");
  const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
  if (!name || BUILTINS.has(name) || !PACKAGE_NAME.test(name)) return undefined;
  return name;
}

/** Package names a JavaScript or declaration file imports by a literal specifier. */
export function importedPackages(source: string): Set<string> {
  const names = new Set<string>();
  for (const match of source.matchAll(SPECIFIER)) {
    const name = packageOfSpecifier(match[2] ?? "");
    if (name) names.add(name);
  }
  return names;
}
