/**
 * The provider's probe: one diagnostic per prerequisite, each with what to do about a failure.
 * Nothing here starts a long-lived jail; the tool checks use one short-lived bwrap run with the same
 * tree a lease gets.
 */
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import type { PluginEnvironmentDiagnostic, PluginEnvironmentProbeResult } from "@paperclipai/plugin-sdk";
import { probeResult, type ProbeFinding } from "@paperclip-sandbox/kit";
import {
  buildJailArgv,
  checkSocketPathLength,
  DEFAULT_SHM_BYTES,
  diskLimitProblem,
  dropPrivilegesCommand,
  ensureStateDir,
  generatedEtcFiles,
  installPrelude,
  probeCgroupAccess,
  resolveJailHostUser,
  seccompArch,
  unreachableBy,
  type HostUser,
} from "@paperclip-sandbox/sandbox-backend";
import { defaultStateDir } from "./leases.js";
import type { BubblewrapConfig } from "./config.js";

export interface ProbeDeps {
  bwrapPath: string | null;
  supervisorScript: string;
  nodeBinary: string;
}

/** `bwrap` on PATH (or the usual location), null when missing. */
export function findBwrap(searchPath = process.env.PATH ?? ""): string | null {
  for (const dir of [...searchPath.split(":").filter(Boolean), "/usr/bin", "/usr/local/bin"]) {
    const candidate = path.join(dir, "bwrap");
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return null;
}

function run(file: string, args: string[], timeoutMs = 15_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"], env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: error.message });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export async function probeBubblewrap(config: BubblewrapConfig, deps: ProbeDeps): Promise<PluginEnvironmentProbeResult> {
  const diagnostics: ProbeFinding[] = [];
  const error = (code: string, message: string) => diagnostics.push({ severity: "error", code, message });
  const warning = (code: string, message: string, brief: string) => diagnostics.push({ severity: "warning", code, message, brief });
  const info = (code: string, message: string) => diagnostics.push({ severity: "info", code, message });

  if (!deps.bwrapPath) {
    error("BWRAP_MISSING", "bubblewrap (bwrap) is not installed: `apt-get install bubblewrap` (Debian/Ubuntu), `dnf install bubblewrap` (Fedora), `pacman -S bubblewrap` (Arch).");
  } else {
    const version = await run(deps.bwrapPath, ["--version"]);
    info("BWRAP_FOUND", `${version.stdout.trim() || "bwrap"} at ${deps.bwrapPath}`);
    const userns = await run(deps.bwrapPath, ["--unshare-user", "--uid", "1000", "--ro-bind", "/", "/", "true"]);
    if (userns.code !== 0) {
      error(
        "USERNS_UNAVAILABLE",
        `bwrap cannot create a user namespace (${userns.stderr.trim() || `exit ${userns.code}`}): enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap).`,
      );
    } else {
      info("USERNS_OK", "user namespaces work");
    }
  }

  if (config.rootfs) {
    const stat = await fsp.stat(config.rootfs).catch(() => null);
    if (!stat?.isDirectory()) error("ROOTFS_MISSING", `rootfs ${config.rootfs} is not a directory`);
    else if (!fs.existsSync(path.join(config.rootfs, "bin/sh")) && !fs.existsSync(path.join(config.rootfs, "usr/bin/sh"))) {
      error("ROOTFS_NO_SHELL", `rootfs ${config.rootfs} has no /bin/sh`);
    } else info("ROOTFS_OK", `rootfs ${config.rootfs}`);
  }

  if (seccompArch() === null) {
    warning(
      "SECCOMP_UNAVAILABLE",
      `no seccomp filter or jail prelude for ${process.arch} (only x86_64 and aarch64): sandboxed code can ptrace, signal and take descriptors from the lease's supervisor, and reach the worker's session keyring`,
      `supervisor NOT isolated from sandboxed code (no seccomp filter for ${process.arch})`,
    );
  }
  const hostUser = resolveJailHostUser(undefined);
  if (hostUser) {
    try {
      if (seccompArch() === null) dropPrivilegesCommand(hostUser);
      info("JAIL_USER", `jails run as the unprivileged host uid ${hostUser.uid}, never as root`);
    } catch (problem) {
      error("JAIL_USER_UNAVAILABLE", `${(problem as Error).message}: install util-linux`);
    }
  }

  const stateDir = config.stateDir ?? defaultStateDir();
  const socketProblem = checkSocketPathLength(stateDir);
  if (socketProblem) error("STATE_DIR_TOO_LONG", socketProblem);
  try {
    await ensureStateDir(stateDir, { jailUser: hostUser });
    info("STATE_DIR_OK", `lease directories under ${stateDir}`);
  } catch (problem) {
    error("STATE_DIR_UNUSABLE", `state directory ${stateDir} is not usable: ${(problem as Error).message}`);
  }

  if (deps.bwrapPath && !diagnostics.some((d) => d.severity === "error")) {
    await probeTools(config, deps, deps.bwrapPath, hostUser, stateDir, diagnostics);
  }

  const unenforced = probeCgroupAccess({ cpu: config.cpu, memoryMb: config.memoryMb, pids: config.pids });
  if (unenforced.length > 0) {
    const limits = unenforced.map((u) => u.limit).join(", ");
    warning(
      "LIMITS_NOT_ENFORCED",
      `not enforced: ${limits} — ${unenforced[0]!.reason}. Run the worker where it may create cgroups (root, or a delegated cgroup v2 subtree).`,
      `limits NOT enforced: ${limits} (the worker cannot create cgroups)`,
    );
  } else if (config.cpu !== undefined || config.memoryMb !== undefined || config.pids !== undefined) {
    info("LIMITS_OK", "cgroup limits can be enforced");
  }
  if (config.diskMb !== undefined) {
    const problem = diskLimitProblem();
    if (problem) {
      warning(
        "DISK_LIMIT_NOT_ENFORCED",
        `diskMb ${config.diskMb} MiB is not enforced: ${problem}. Run the worker as root (with e2fsprogs and loop devices) to give each lease a filesystem of that size.`,
        `disk limit NOT enforced: diskMb ${config.diskMb} MiB (${problem.replace(/;.*$/, "")})`,
      );
    } else {
      info("DISK_LIMIT_OK", `disk limit enforced: each lease gets its own ${config.diskMb} MiB filesystem (ext4, sparse on the host) for workspace, home and /tmp`);
    }
  }

  return probeResult("bubblewrap sandbox", diagnostics);
}

/**
 * `sh`, `node` and `tar` inside a jail with the lease's tree, as the host user leases run as; each
 * missing tool is its own error.
 */
async function probeTools(config: BubblewrapConfig, deps: ProbeDeps, bwrapPath: string, hostUser: HostUser | null, stateDir: string, diagnostics: PluginEnvironmentDiagnostic[]): Promise<void> {
  const scratch = await fsp.mkdtemp(path.join(os.tmpdir(), "paperclip-bwrap-probe-"));
  try {
    const dirs = ["workspace", "home", "cache", "tmp", "etc"].map((name) => path.join(scratch, name));
    await Promise.all(dirs.map((dir) => fsp.mkdir(dir)));
    for (const [name, text] of Object.entries(generatedEtcFiles())) await fsp.writeFile(path.join(scratch, "etc", name), text, { mode: 0o644 });
    if (hostUser) {
      await fsp.chmod(scratch, 0o711);
      for (const dir of dirs) await fsp.chown(dir, hostUser.uid, hostUser.gid);
    }
    const jail = buildJailArgv(
      {
        workspaceDir: dirs[0]!,
        homeDir: dirs[1]!,
        cacheDir: dirs[2]!,
        tmpDir: dirs[3]!,
        etcDir: dirs[4]!,
        supervisorScript: deps.supervisorScript,
        nodeBinary: deps.nodeBinary,
        rootfs: config.rootfs,
        shmBytes: DEFAULT_SHM_BYTES,
      },
      { infoFd: 1, configFd: 0 },
    );
    // Replace the supervisor command with a one-shot check; --info-fd 1 would mix into stdout, so drop
    // it, and the supervisor's own files are not needed for it.
    // A root worker's jails bind a copy of a node binary their host user cannot reach (the backend
    // makes it at the first lease): here that bind is left out, and so is the node check.
    const nodeOutOfReach = hostUser !== null && unreachableBy(deps.nodeBinary, hostUser) !== null;
    const args: string[] = [];
    for (let i = 0; i < jail.options.length; i += 1) {
      const arg = jail.options[i]!;
      const dest = jail.options[i + 2] ?? "";
      if (arg === "--info-fd") i += 1;
      else if (arg === "--ro-bind" && dest.startsWith("/opt/paperclip/") && (dest !== "/opt/paperclip/bin/node" || nodeOutOfReach)) i += 2;
      else args.push(arg);
    }
    const script = `for t in sh node tar; do if command -v "$t" >/dev/null 2>&1; then echo "ok $t"; else echo "missing $t"; fi; done; "${jail.nodePath}" -e 'process.stdout.write("node-runs\\n")' 2>&1 | head -c 300`;
    const command = [bwrapPath, ...args, "--setenv", "PATH", jail.path, "--", "/bin/sh", "-c", script];
    // Started as a lease's jail is: through the jail prelude (which takes the jails' host uid).
    const arch = seccompArch();
    const prefix = arch ? [await installPrelude(stateDir, arch, hostUser)] : hostUser ? dropPrivilegesCommand(hostUser) : [];
    const [file, ...rest] = [...prefix, ...command];
    const result = await run(file!, rest);
    if (result.code === null || (!result.stdout.includes("ok sh") && !result.stdout.includes("missing sh"))) {
      diagnostics.push({ severity: "error", code: "JAIL_START_FAILED", message: `a jail could not start: ${result.stderr.trim() || `exit ${result.code}`}` });
      return;
    }
    if (nodeOutOfReach && result.stdout.includes("missing node")) {
      diagnostics.push({ severity: "info", code: "TOOL_NODE_OK", message: `node: the worker's ${deps.nodeBinary}, copied into the state directory for the jails (their host uid cannot reach it)` });
    }
    for (const tool of nodeOutOfReach && result.stdout.includes("missing node") ? ["sh", "tar"] : ["sh", "node", "tar"]) {
      if (result.stdout.includes(`ok ${tool}`)) diagnostics.push({ severity: "info", code: `TOOL_${tool.toUpperCase()}_OK`, message: `${tool} works inside the jail` });
      else diagnostics.push({ severity: "error", code: `TOOL_${tool.toUpperCase()}_MISSING`, message: `${tool} is not available inside the jail${config.rootfs ? ` (rootfs ${config.rootfs})` : ""}` });
    }
    if (result.stdout.includes("ok node") && !result.stdout.includes("node-runs")) {
      diagnostics.push({ severity: "error", code: "TOOL_NODE_BROKEN", message: `node is present but does not run inside the jail: ${result.stdout.split("\n").slice(3).join(" ").trim()}` });
    }
  } finally {
    await fsp.rm(scratch, { recursive: true, force: true });
  }
}
