/**
 * What every jail of one backend is started with, prepared once: the installed supervisor copy,
 * the seccomp program, the privilege drop of a root worker, and (per node binary and tree) the ELF
 * loader the supervisor is started through. Each protection that cannot be had on this host is
 * named with the reason, so a sandbox can report what is not enforced.
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { supervisorLoader } from "./loader.js";
import { dropPrivilegesCommand, unreachableBy, type HostUser } from "./host-user.js";
import { buildSeccompProgram, seccompArch } from "./seccomp.js";
import { installPrelude } from "./prelude.js";
import { buildReaper } from "./reaper.js";
import { installEtcFiles, installSupervisor } from "../store/supervisor-copy.js";

export type ProtectionName = "seccomp-filter" | "supervisor-not-dumpable" | "fresh-session-keyring" | "timeout-ends-descendants";

export interface UnenforcedProtection {
  protection: ProtectionName;
  reason: string;
}

export interface JailRuntime {
  /** The jail's host user when it is not the worker's own uid (a root worker's), else null. */
  readonly hostUser: HostUser | null;
  /** The installed supervisor entry (bound into every jail). */
  supervisorScript(): Promise<string>;
  /** The directory of generated passwd, group and hosts a jail binds (one per content: per sandbox user). */
  etcDir(files: Record<string, string>): Promise<string>;
  /** The seccomp program, or null (with the reason in `unenforced`). */
  readonly seccomp: Buffer | null;
  /** The command reaper (reaper.ts) every command starts through, or null (with the reason in `unenforced`). */
  readonly reaper: Buffer | null;
  /**
   * What bwrap is started through: the jail prelude (which also drops to `hostUser`), or on an arch
   * without one setpriv for the drop (the supervisor still closes what it inherited).
   */
  startPrefix(): Promise<string[]>;
  /**
   * The worker's node binary as the jail's host user can bind it: the binary itself, or (a root
   * worker's node under e.g. /root, out of that user's reach) a copy under the state directory.
   */
  nodeBinaryFor(nodeBinary: string): Promise<string>;
  /** The host file of the loader for this node binary and tree, or null (static node, or missing). */
  loaderFor(hostNodeBinary: string, treeRoot: string): string | null;
  /** Protections this runtime cannot give (the loader's is per binary, see `loaderFor`). */
  readonly unenforced: readonly UnenforcedProtection[];
}

export function createJailRuntime(options: { stateDir: string; supervisorEntry: string; hostUser: HostUser | null }): JailRuntime {
  const arch = seccompArch();
  const seccomp = arch ? buildSeccompProgram(arch) : null;
  const unenforced: UnenforcedProtection[] = seccomp
    ? []
    : [
        { protection: "seccomp-filter", reason: `no seccomp filter is described for ${process.arch} (only x86_64 and aarch64)` },
        { protection: "fresh-session-keyring", reason: `no jail prelude is assembled for ${process.arch}: jails share the worker's session keyring` },
        {
          protection: "timeout-ends-descendants",
          reason: `no command reaper is assembled for ${process.arch}: a timeout ends the command's process group and what is still below it, not what it orphaned in another session`,
        },
      ];
  let installed: Promise<string> | null = null;
  const etcDirs = new Map<string, Promise<string>>();
  let prefix: Promise<string[]> | null = null;
  const nodeCopies = new Map<string, Promise<string>>();
  const loaders = new Map<string, string | null>();
  return {
    hostUser: options.hostUser,
    seccomp,
    reaper: arch ? buildReaper(arch) : null,
    unenforced,
    supervisorScript() {
      installed ??= installSupervisor(options.stateDir, options.supervisorEntry).catch((error: unknown) => {
        installed = null;
        throw error;
      });
      return installed;
    },
    etcDir(files) {
      const key = JSON.stringify(Object.entries(files).sort());
      let dir = etcDirs.get(key);
      if (!dir) {
        dir = installEtcFiles(options.stateDir, files).catch((error: unknown) => {
          etcDirs.delete(key);
          throw error;
        });
        etcDirs.set(key, dir);
      }
      return dir;
    },
    startPrefix() {
      prefix ??= (async () => {
        if (arch) return [await installPrelude(options.stateDir, arch, options.hostUser)];
        return options.hostUser ? dropPrivilegesCommand(options.hostUser) : [];
      })().catch((error: unknown) => {
        prefix = null;
        throw error;
      });
      return prefix;
    },
    nodeBinaryFor(nodeBinary) {
      const user = options.hostUser;
      if (!user || unreachableBy(nodeBinary, user) === null) return Promise.resolve(nodeBinary);
      let copy = nodeCopies.get(nodeBinary);
      if (!copy) {
        copy = installNodeCopy(options.stateDir, nodeBinary).catch((error: unknown) => {
          nodeCopies.delete(nodeBinary);
          throw error;
        });
        nodeCopies.set(nodeBinary, copy);
      }
      return copy;
    },
    loaderFor(hostNodeBinary, treeRoot) {
      const key = `${treeRoot}\0${hostNodeBinary}`;
      if (!loaders.has(key)) loaders.set(key, supervisorLoader(hostNodeBinary, treeRoot));
      return loaders.get(key)!;
    },
  };
}

/** Copies `nodeBinary` to `<stateDir>/bin/node-<key>` (0755) once per binary (key: path, size, mtime). */
async function installNodeCopy(stateDir: string, nodeBinary: string): Promise<string> {
  const stat = await fsp.stat(nodeBinary);
  const key = createHash("sha256").update(`${nodeBinary}\0${stat.size}\0${stat.mtimeMs}`).digest("hex").slice(0, 12);
  const dir = path.join(stateDir, "bin");
  const target = path.join(dir, `node-${key}`);
  if (fs.existsSync(target)) return target;
  await fsp.mkdir(dir, { recursive: true, mode: 0o755 });
  await fsp.chmod(dir, 0o755);
  const temp = `${target}.${process.pid}.tmp`;
  await fsp.copyFile(nodeBinary, temp, fs.constants.COPYFILE_FICLONE);
  await fsp.chmod(temp, 0o755);
  await fsp.rename(temp, target);
  return target;
}
