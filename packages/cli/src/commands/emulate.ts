import { readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runEmulator, type EmulatorDefinition } from "@paperclip-sandbox/emulator-kit";
import { parsePositiveInt } from "../cli-args.js";
import { UsageError } from "../errors.js";
import { out } from "../io.js";

const EMULATOR_PACKAGE_PREFIX = "emulator-";

/** Emulator packages this CLI can load (`@paperclip-sandbox/emulator-<vendor>` next to it). */
async function knownEmulators(): Promise<string[]> {
  const names = new Set<string>();
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const scope = path.join(dir, "node_modules", "@paperclip-sandbox");
    for (const entry of await readdir(scope).catch(() => [] as string[])) {
      if (entry.startsWith(EMULATOR_PACKAGE_PREFIX)) names.add(entry.slice(EMULATOR_PACKAGE_PREFIX.length));
    }
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return [...names].sort();
}

export async function loadEmulator(vendor: string): Promise<EmulatorDefinition> {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(vendor)) throw new UsageError(`emulate: '${vendor}' is not a vendor name`);
  let mod: { emulator?: EmulatorDefinition };
  try {
    mod = (await import(`@paperclip-sandbox/${EMULATOR_PACKAGE_PREFIX}${vendor}`)) as { emulator?: EmulatorDefinition };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") throw error;
    const known = await knownEmulators();
    throw new UsageError(`emulate: unknown vendor '${vendor}' (known: ${known.join(", ") || "none installed"})`);
  }
  if (!mod.emulator || typeof mod.emulator.start !== "function") throw new UsageError(`emulate: the ${vendor} emulator package exports no emulator`);
  return mod.emulator;
}

/**
 * Runs one vendor emulator on loopback until interrupted, printing its URL and credential, so an
 * operator can point Paperclip (or a provider's SDK) at it before having an account.
 */
export async function emulateCommand(positionals: string[], values: Record<string, unknown>): Promise<number> {
  if (values.list === true) {
    const known = await knownEmulators();
    out(`${known.join("\n")}${known.length ? "\n" : ""}`);
    return 0;
  }
  const [vendor, ...extra] = positionals;
  if (!vendor) throw new UsageError("emulate: which vendor? (paperclip-sandbox emulate --list)");
  if (extra.length > 0) throw new UsageError(`emulate: unexpected argument '${extra[0]}'`);
  const port = typeof values.port === "string" ? parsePositiveInt("--port", values.port) : undefined;
  const host = typeof values.host === "string" ? values.host : "127.0.0.1";
  const definition = await loadEmulator(vendor);
  const running = await runEmulator(definition, { host, options: port === undefined ? {} : { port } });
  if (values.json === true) {
    out(`${JSON.stringify({ name: running.name, url: running.url, endpoints: running.endpoints, credentials: running.credentials, env: running.env })}\n`);
  } else {
    const lines = [`${running.name} emulator at ${running.url}`, ...Object.entries(running.endpoints).map(([name, url]) => `  ${name}: ${url}`)];
    lines.push(...Object.entries(running.credentials).map(([name, value]) => `  ${name}: ${value}`));
    const env = Object.entries(running.env);
    if (env.length > 0) lines.push("  environment:", ...env.map(([name, value]) => `    export ${name}=${value}`));
    lines.push("Ctrl-C stops it (and destroys every sandbox it holds).");
    out(`${lines.join("\n")}\n`);
  }
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await running.close();
  return 0;
}
