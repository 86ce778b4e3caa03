import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { SdkOperation } from "@paperclip-sandbox/emulator-kit";

/** The SandboxClient's members (`this.<group> = new <Class>(...)`) by class. */
const GROUPS: Record<string, string> = {
  BackupClient: "backup",
  CommandClient: "commands",
  DesktopClient: "desktop",
  FileClient: "files",
  GitClient: "git",
  InterpreterClient: "interpreter",
  PortClient: "ports",
  ProcessClient: "processes",
  UtilityClient: "utils",
  WatchClient: "watch",
};

/**
 * Every method of the installed `@cloudflare/sandbox`'s container clients (the classes the Durable
 * Object talks to the container through), read from its bundle: it imports `cloudflare:*` modules,
 * so it cannot be loaded in Node to be introspected.
 */
export function sandboxSdkOperations(): SdkOperation[] {
  const require = createRequire(import.meta.url);
  const bundle = readFileSync(require.resolve("@cloudflare/sandbox"), "utf8");
  const classes = [...bundle.matchAll(/^var (\w+Client) = class extends BaseHttpClient \{/gm)];
  const operations: SdkOperation[] = [];
  for (const [i, match] of classes.entries()) {
    const group = GROUPS[match[1]!];
    if (!group) throw new Error(`an SDK client class this fixture does not know: ${match[1]}`);
    const end = classes[i + 1]?.index ?? bundle.indexOf("var SandboxClient = class");
    const body = bundle.slice(match.index! + match[0].length, end);
    for (const [, name] of body.matchAll(/^\t(?:async )?\*?(\w+)\(/gm)) if (name !== "constructor") operations.push({ group, name: name! });
  }
  return operations;
}
