/**
 * The copy of the compiled supervisor that jails bind, under the state directory. Bound from there
 * rather than from the plugin's install: the jail's host uid (unprivileged, for a root worker) must
 * be able to reach it, which it cannot under e.g. /root, and the plugin's host path stays out of
 * the jail's /proc/self/mountinfo. One directory per content (sha256), written once and renamed
 * into place, so workers of different versions can share a state directory.
 */
import { createHash, randomBytes } from "node:crypto";
import fsp from "node:fs/promises";
import path from "node:path";

/** Installs `entry` and its sibling `in-jail/*.mjs`; returns the installed entry's path. */
export async function installSupervisor(stateDir: string, entry: string): Promise<string> {
  const modulesDir = path.join(path.dirname(entry), "in-jail");
  const names = (await fsp.readdir(modulesDir)).filter((name) => name.endsWith(".mjs")).sort();
  const files: Array<[string, Buffer]> = [[path.basename(entry), await fsp.readFile(entry)]];
  for (const name of names) files.push([`in-jail/${name}`, await fsp.readFile(path.join(modulesDir, name))]);
  const hash = createHash("sha256");
  for (const [name, bytes] of files) hash.update(`${name}\0${bytes.length}\0`).update(bytes);
  const root = path.join(stateDir, "supervisor");
  const target = path.join(root, hash.digest("hex").slice(0, 16));
  const installed = path.join(target, path.basename(entry));
  try {
    await fsp.access(path.join(target, ".complete"));
    return installed;
  } catch {
    // not installed yet
  }
  await fsp.mkdir(root, { recursive: true, mode: 0o755 });
  await fsp.chmod(root, 0o755);
  const temp = path.join(root, `.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
  await fsp.mkdir(path.join(temp, "in-jail"), { recursive: true, mode: 0o755 });
  try {
    for (const [name, bytes] of files) {
      // Explicit modes: a restrictive umask must not leave the jail's host uid unable to read them.
      await fsp.writeFile(path.join(temp, name), bytes, { mode: 0o644 });
      await fsp.chmod(path.join(temp, name), 0o644);
    }
    await fsp.chmod(temp, 0o755);
    await fsp.chmod(path.join(temp, "in-jail"), 0o755);
    await fsp.writeFile(path.join(temp, ".complete"), "", { mode: 0o644 });
    await fsp.rename(temp, target);
  } catch (error) {
    await fsp.rm(temp, { recursive: true, force: true });
    // Another worker installed the same content first.
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
  }
  return installed;
}

/**
 * Generated passwd, group and hosts a jail binds read-only at /etc (the same for every sandbox of
 * one user), under `<stateDir>/etc/<sha256 of the content>/`, written once: bound from there rather
 * than from each sandbox's directory, the jail's /proc/self/mountinfo does not name the sandbox.
 * Returns the directory.
 */
export async function installEtcFiles(stateDir: string, files: Record<string, string>): Promise<string> {
  const names = Object.keys(files).sort();
  const hash = createHash("sha256");
  for (const name of names) hash.update(`${name}\0${files[name]}\0`);
  const root = path.join(stateDir, "etc");
  const target = path.join(root, hash.digest("hex").slice(0, 16));
  try {
    await fsp.access(path.join(target, ".complete"));
    return target;
  } catch {
    // not installed yet
  }
  await fsp.mkdir(root, { recursive: true, mode: 0o755 });
  await fsp.chmod(root, 0o755);
  const temp = path.join(root, `.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
  await fsp.mkdir(temp, { mode: 0o755 });
  try {
    for (const name of names) {
      await fsp.writeFile(path.join(temp, name), files[name]!, { mode: 0o644 });
      await fsp.chmod(path.join(temp, name), 0o644);
    }
    await fsp.chmod(temp, 0o755);
    await fsp.writeFile(path.join(temp, ".complete"), "", { mode: 0o644 });
    await fsp.rename(temp, target);
  } catch (error) {
    await fsp.rm(temp, { recursive: true, force: true });
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
  }
  return target;
}
