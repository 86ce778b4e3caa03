/**
 * The bubblewrap argv for a sandbox's long-lived jail. Pure: it only reads the host tree's shape
 * (which top-level entries are symlinks) so the result can be unit-tested and reviewed as a list.
 */
import fs from "node:fs";
import path from "node:path";

/** Paths as seen inside the jail. */
export const SANDBOX_PATHS = {
  workspace: "/workspace",
  home: "/home/sandbox",
  cache: "/home/sandbox/.cache",
  tmp: "/tmp",
  supervisor: "/opt/paperclip/supervisor.mjs",
  /** The supervisor's modules (its entry imports ./in-jail/main.mjs). */
  supervisorModules: "/opt/paperclip/in-jail",
  /** Where a node binary outside the host's /usr is bound; added to PATH. */
  nodeDir: "/opt/paperclip/bin",
  /**
   * An execute-only (0111) copy of node's ELF loader: the supervisor is started through it, and a
   * process that execs a file it cannot read is not dumpable, so no command of the same uid can
   * ptrace it, read its memory or take its descriptors (/proc/2/{mem,fd}, pidfd_getfd).
   */
  loader: "/opt/paperclip/ld.so",
  /** The command reaper every command is started through (jail/reaper.ts). */
  reaper: "/opt/paperclip/reaper",
  egressDir: "/run/paperclip-egress",
} as const;

/**
 * The jail's init (pid 1; bwrap runs with --as-pid-1): starts the supervisor with the sandbox's log
 * as its stderr, keeps nothing itself but /dev/null (commands may open /proc/1/fd/*), and reaps
 * orphaned processes (dash's `wait` collects any child) until the supervisor exits, which ends the
 * jail with the supervisor's exit status (bwrap passes it on to the keeper, which records it: an idle
 * supervisor's status is how the host tells an idle jail from one that ended otherwise). bwrap's own
 * init would keep bwrap's stdio, the host's log file among it.
 */
export const JAIL_INIT_SCRIPT = 'exec 8>&2 2>/dev/null; "$@" 2>&8 8>&- & exec 3>&- 4>&- 5<&- 6<&- 7<&- 8>&- 9<&-; wait $!';
const JAIL_INIT_NAME = "paperclip-init";

export const SANDBOX_UID = 1000;
export const SANDBOX_GID = 1000;
export const SANDBOX_USER = "sandbox";
const SANDBOX_HOSTNAME = "sandbox";

/** Host top-level entries tools need; symlinks (merged /usr) are recreated, directories ro-bound. */
const HOST_TREE = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
/** Selected /etc entries, read-only; passwd/group/hosts are generated per sandbox instead. */
const HOST_ETC = ["ssl", "ca-certificates", "ca-certificates.conf", "pki", "resolv.conf", "nsswitch.conf", "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "mime.types"];
/** Never taken from a rootfs either: the jail supplies these itself. */
const ROOTFS_EXCLUDED = new Set(["proc", "dev", "sys", "tmp", "home", "root", "run", "workspace", "opt"]);

export interface JailLayout {
  /** Host directories of the sandbox. */
  workspaceDir: string;
  homeDir: string;
  cacheDir: string;
  tmpDir: string;
  /** Host directory holding the generated passwd, group and hosts files. */
  etcDir: string;
  /** Host directory holding the egress proxy socket, bound read-only when the sandbox has a grant. */
  egressDir?: string;
  /** Host path of the compiled supervisor entry; its sibling `in-jail/` directory is bound too. */
  supervisorScript: string;
  /** Host path of the node binary to run inside (its real file). */
  nodeBinary: string;
  /** Optional directory replacing the host tree. */
  rootfs?: string;
  /** The inherited descriptor of node's ELF loader (read by bwrap into the execute-only copy). */
  loaderFd?: number;
  /** The inherited descriptor of the compiled seccomp filter (seccomp.ts). */
  seccompFd?: number;
  /** The inherited descriptor of the command reaper (reaper.ts), read by bwrap into an execute-and-read-only file. */
  reaperFd?: number;
  /** Size of the jail's /dev/shm (a tmpfs counted against the memory limit). */
  shmBytes: number;
  /** The sandbox user inside (default uid/gid 1000, home /home/sandbox). */
  user?: { uid: number; gid: number; home: string };
  /** Further writable host directories and where they are bound. */
  mounts?: Array<{ hostDir: string; path: string; readOnly: boolean }>;
}

export interface JailCommand {
  /** bwrap's options (they go on a pipe: `bwrap --args FD`, out of the host's `ps`). */
  options: string[];
  /** What bwrap runs: the supervisor, naming only the fd of its config. */
  command: string[];
  /** `[...options, "--", ...command]`, for a one-off bwrap run (the probe). */
  argv: string[];
  /** The node path inside the jail. */
  nodePath: string;
  /** PATH for processes inside the jail. */
  path: string;
  /** The host file of the node the supervisor runs (its loader must be the one for this binary). */
  hostNodeBinary: string;
}

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

export interface JailFds {
  /** The fd bwrap reports the namespace init's pid on. */
  infoFd: number;
  /** The inherited fd the supervisor reads its JSON config from (never argv: it is world-readable). */
  configFd: number;
}

/** The bwrap options and command that start `[loader] node supervisor.mjs <configFd>`. */
export function buildJailArgv(layout: JailLayout, fds: JailFds): JailCommand {
  const args: string[] = [
    "--unshare-all", // user, ipc, pid, net, uts, cgroup: only the jail's own loopback
    "--unshare-user",
    "--disable-userns", // no nested user namespaces: less kernel surface for the sandbox
    "--uid",
    String(layout.user?.uid ?? SANDBOX_UID),
    "--gid",
    String(layout.user?.gid ?? SANDBOX_GID),
    "--hostname",
    SANDBOX_HOSTNAME,
    // As root a read-only bind can otherwise be remounted writable from inside (shown in
    // local-isolation.md); with a user namespace this keeps the sandbox without any capability.
    "--cap-drop",
    "ALL",
    "--new-session", // no TIOCSTI into a controlling terminal
    // The parent is NOT the worker but the jail's detached host-side keeper, which ends the jail at
    // the sandbox's expiry (see keeper.ts): the jail survives worker restarts yet never outlives it.
    "--die-with-parent",
    "--as-pid-1", // pid 1 is JAIL_INIT_SCRIPT
    "--info-fd",
    String(fds.infoFd),
  ];

  const treeRoot = layout.rootfs ?? "/";
  const entries = layout.rootfs ? listRootfs(layout.rootfs) : HOST_TREE;
  for (const name of entries) {
    const source = path.join(treeRoot, name);
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(source);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push("--symlink", fs.readlinkSync(source), `/${name}`);
    else if (stat.isDirectory() || stat.isFile()) args.push("--ro-bind", source, `/${name}`);
  }
  if (!layout.rootfs) {
    for (const name of HOST_ETC) args.push("--ro-bind-try", path.join("/etc", name), `/etc/${name}`);
  }
  for (const name of ["passwd", "group", "hosts"]) {
    // Over a rootfs /etc the bind needs an existing mount point; the host case builds /etc itself.
    if (layout.rootfs && !fs.existsSync(path.join(layout.rootfs, "etc", name))) continue;
    args.push("--ro-bind", path.join(layout.etcDir, name), `/etc/${name}`);
  }

  args.push("--proc", "/proc", "--dev", "/dev");
  // bwrap's /dev is a tmpfs of half the host's RAM, /dev/shm included: shared memory gets its own
  // tmpfs of the lease's size, and nothing else under /dev can be created.
  args.push("--perms", "1777", "--size", String(layout.shmBytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev");
  // bwrap 0.8 leaves /proc/sys writable. Global sysctls check only file modes, and a root worker's
  // sandbox user is host uid 0 (the user namespace maps 1000 to the worker's uid): it could retune
  // the host kernel (vm.*, kernel.*) or, via sysrq-trigger, reboot it. Both become read-only. (The
  // bound /proc/sys serves each reader's own namespaces, so the jail still sees its net/uts values.)
  args.push("--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger");
  args.push("--bind", layout.workspaceDir, SANDBOX_PATHS.workspace);
  const home = layout.user?.home ?? SANDBOX_PATHS.home;
  args.push("--bind", layout.homeDir, home);
  args.push("--bind", layout.cacheDir, `${home}/.cache`);
  args.push("--bind", layout.tmpDir, SANDBOX_PATHS.tmp);
  // Parents before children: a mount inside another one is bound after it (and so on top of it).
  for (const mount of [...(layout.mounts ?? [])].sort((a, b) => depth(a.path) - depth(b.path))) {
    args.push(mount.readOnly ? "--ro-bind" : "--bind", mount.hostDir, mount.path);
  }
  args.push("--ro-bind", layout.supervisorScript, SANDBOX_PATHS.supervisor);
  args.push("--ro-bind", path.join(path.dirname(layout.supervisorScript), "in-jail"), SANDBOX_PATHS.supervisorModules);

  const { nodePath, hostNodeBinary, inTree } = supervisorNode(layout.rootfs, layout.nodeBinary);
  let searchPath = DEFAULT_PATH;
  if (!inTree) {
    // The worker's node lives outside the bound tree (e.g. nvm): bind just its file (a root worker's
    // jails bind a copy when the jail's host user cannot reach it, see runtime.ts).
    args.push("--ro-bind", layout.nodeBinary, nodePath);
    searchPath = `${DEFAULT_PATH}:${SANDBOX_PATHS.nodeDir}`;
  }
  if (layout.egressDir) args.push("--ro-bind", layout.egressDir, SANDBOX_PATHS.egressDir);
  if (layout.loaderFd !== undefined) args.push("--perms", "0111", "--ro-bind-data", String(layout.loaderFd), SANDBOX_PATHS.loader);
  if (layout.reaperFd !== undefined) args.push("--perms", "0555", "--ro-bind-data", String(layout.reaperFd), SANDBOX_PATHS.reaper);
  if (layout.seccompFd !== undefined) args.push("--seccomp", String(layout.seccompFd));

  // Everything not bound writable above (the jail's root, /etc, /opt, /run) becomes read-only.
  args.push("--remount-ro", "/");
  args.push("--chdir", SANDBOX_PATHS.workspace);
  const supervisor = [...(layout.loaderFd !== undefined ? [SANDBOX_PATHS.loader] : []), nodePath, SANDBOX_PATHS.supervisor, String(fds.configFd)];
  const command = ["/bin/sh", "-c", JAIL_INIT_SCRIPT, JAIL_INIT_NAME, ...supervisor];
  return { options: args, command, argv: [...args, "--", ...command], nodePath, path: searchPath, hostNodeBinary };
}

const depth = (jailPath: string) => jailPath.split("/").length;

/**
 * Why a writable directory cannot be bound at `jailPath`, or null: bwrap makes missing mount points,
 * but not inside a read-only bind of the host tree (or rootfs), where the directory must exist.
 */
export function mountPointProblem(jailPath: string, rootfs?: string): string | null {
  const top = jailPath.split("/")[1] ?? "";
  const tree = rootfs ? listRootfs(rootfs) : HOST_TREE;
  const inTree = tree.includes(top) || (!rootfs && top === "etc" && HOST_ETC.some((name) => jailPath === `/etc/${name}` || jailPath.startsWith(`/etc/${name}/`)));
  if (!inTree) return null;
  const onHost = path.join(rootfs ?? "/", jailPath);
  let stat: fs.Stats;
  try {
    stat = fs.statSync(onHost);
  } catch {
    return `${jailPath} does not exist in the sandbox's read-only tree (a mount point there must exist)`;
  }
  return stat.isDirectory() ? null : `${jailPath} is not a directory in the sandbox's read-only tree`;
}

function listRootfs(rootfs: string): string[] {
  return fs.readdirSync(rootfs).filter((name) => !ROOTFS_EXCLUDED.has(name));
}

/**
 * The node the supervisor runs: the tree's own when it has one, else the worker's binary bound at
 * /opt/paperclip/bin/node (`inTree` false). `hostNodeBinary` is that file on the host.
 */
export function supervisorNode(rootfs: string | undefined, nodeBinary: string): { nodePath: string; hostNodeBinary: string; inTree: boolean } {
  const treeRoot = rootfs ?? "/";
  const inTree = findNodeInTree(treeRoot);
  if (inTree) return { nodePath: inTree, hostNodeBinary: path.join(treeRoot, inTree), inTree: true };
  return { nodePath: `${SANDBOX_PATHS.nodeDir}/node`, hostNodeBinary: nodeBinary, inTree: false };
}

/** Where `node` is inside the jail when the bound tree already has it. */
function findNodeInTree(treeRoot: string): string | null {
  for (const candidate of ["/usr/bin/node", "/usr/local/bin/node"]) {
    if (fs.existsSync(path.join(treeRoot, candidate))) {
      // Only the host's /usr is bound; /usr/local is under it, so both candidates are inside.
      return candidate;
    }
  }
  return null;
}

/**
 * passwd/group/hosts for the sandbox user, so `id`, `whoami`, `~` and `localhost` work. A user with
 * uid 0 is root itself (its home is then the sandbox's home).
 */
export function generatedEtcFiles(
  user: { name: string; uid: number; gid: number; home: string } = { name: SANDBOX_USER, uid: SANDBOX_UID, gid: SANDBOX_GID, home: SANDBOX_PATHS.home },
): Record<"passwd" | "group" | "hosts", string> {
  const root = user.uid === 0 ? `root:x:0:0:root:${user.home}:/bin/sh\n` : `root:x:0:0:root:/root:/usr/sbin/nologin\n`;
  const own = user.uid === 0 ? "" : `${user.name}:x:${user.uid}:${user.gid}:Paperclip sandbox:${user.home}:/bin/sh\n`;
  const group = user.gid === 0 || user.gid === 65534 ? "" : `${user.uid === 0 ? "sandbox" : user.name}:x:${user.gid}:\n`;
  return {
    passwd: `${root}${own}nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
    group: `root:x:0:\n${group}nogroup:x:65534:\n`,
    hosts: `127.0.0.1\tlocalhost ${SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n`,
  };
}
