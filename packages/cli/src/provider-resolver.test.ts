import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { cliRepoRoot, resolveProvider } from "./provider-resolver.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The layout `npm install -g` makes: <prefix>/lib/node_modules/@paperclip-sandbox/{cli,plugin-*}. */
function globalInstall(providers: string[]): { cliUrl: string; modules: string } {
  const prefix = mkdtempSync(path.join(os.tmpdir(), "cli-global-"));
  dirs.push(prefix);
  const modules = path.join(prefix, "lib", "node_modules", "@paperclip-sandbox");
  mkdirSync(path.join(modules, "cli", "dist"), { recursive: true });
  writeFileSync(path.join(modules, "cli", "dist", "main.js"), "");
  for (const name of providers) {
    mkdirSync(path.join(modules, name), { recursive: true });
    writeFileSync(path.join(modules, name, "package.json"), JSON.stringify({ name: `@paperclip-sandbox/${name}` }));
  }
  return { cliUrl: pathToFileURL(path.join(modules, "cli", "dist", "main.js")).href, modules };
}

describe("resolveProvider outside a checkout", () => {
  it("finds a provider package installed beside the CLI by its driver key", () => {
    const { cliUrl, modules } = globalInstall(["plugin-bubblewrap"]);
    const resolved = resolveProvider(undefined, os.tmpdir(), cliRepoRoot(cliUrl), cliUrl);
    expect(resolved).toEqual({ pluginDir: path.join(modules, "plugin-bubblewrap"), requestedDriverKey: "bubblewrap", spec: "bubblewrap" });
  });

  it("says which package to install when a known provider is not installed", () => {
    const { cliUrl } = globalInstall([]);
    expect(() => resolveProvider("bubblewrap", os.tmpdir(), cliRepoRoot(cliUrl), cliUrl)).toThrow(
      "provider 'bubblewrap' is not installed: install @paperclip-sandbox/plugin-bubblewrap next to the CLI (npm install -g @paperclip-sandbox/plugin-bubblewrap) or give a path to a plugin package",
    );
  });

  it("accepts an installed provider this CLI version does not list", () => {
    const { cliUrl, modules } = globalInstall(["plugin-later"]);
    expect(resolveProvider("later", os.tmpdir(), cliRepoRoot(cliUrl), cliUrl).pluginDir).toBe(path.join(modules, "plugin-later"));
  });
});
