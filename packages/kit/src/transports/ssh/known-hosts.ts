import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";

/**
 * known_hosts files the provider owns (never the user's `~/.ssh/known_hosts`), written unhashed so
 * entries can be found, pinned and forgotten by destination.
 */

/** The host field ssh writes for a destination: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** The lines of `text` whose host field names the destination (markers such as `@revoked` kept out). */
export function knownHostsLinesFor(text: string, host: string, port: number): string[] {
  const name = knownHostsName(host, port);
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#") && !line.startsWith("@"))
    .filter((line) => line.split(/\s+/, 1)[0]!.split(",").includes(name));
}

/** Reads a known_hosts file; a missing file is empty. */
export async function readKnownHosts(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
}

/**
 * Drops every entry for the destination. Used when a VM is created: whatever key an earlier VM at the
 * same destination had, the new machine's key is learned afresh (trust on first use), and only then.
 */
export async function forgetKnownHost(path: string, host: string, port: number): Promise<void> {
  const text = await readKnownHosts(path);
  if (text === "") return;
  const name = knownHostsName(host, port);
  const kept = text.split("\n").filter((line) => {
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) return trimmed !== "";
    const fields = trimmed.split(/\s+/);
    const hosts = (fields[0]!.startsWith("@") ? fields[1] : fields[0]) ?? "";
    return !hosts.split(",").includes(name);
  });
  await writePrivateFile(path, kept.length ? `${kept.join("\n")}\n` : "");
}

/** Adds lines for a destination unless an entry for it is already there (re-seeding a fresh worker). */
export async function seedKnownHost(path: string, host: string, port: number, lines: readonly string[]): Promise<void> {
  if (lines.length === 0) return;
  const text = await readKnownHosts(path);
  if (knownHostsLinesFor(text, host, port).length > 0) return;
  const name = knownHostsName(host, port);
  const seeded = lines.map((line) => line.trim()).filter((line) => line.split(/\s+/, 1)[0]!.split(",").includes(name));
  if (seeded.length === 0) return;
  await writePrivateFile(path, `${text}${text === "" || text.endsWith("\n") ? "" : "\n"}${seeded.join("\n")}\n`);
}

/** Replaces a file atomically with mode 0600 from its first byte (no readable window). */
export async function writePrivateFile(path: string, content: string): Promise<void> {
  const temp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
