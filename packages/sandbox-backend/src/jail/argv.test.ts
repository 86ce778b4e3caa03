import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { buildJailArgv, generatedEtcFiles, JAIL_INIT_SCRIPT } from "./argv.js";

const layout = {
  workspaceDir: "/state/leases/x/workspace",
  homeDir: "/state/leases/x/home",
  cacheDir: "/state/leases/x/cache",
  tmpDir: "/state/leases/x/tmp",
  etcDir: "/state/leases/x/etc",
  supervisorScript: "/plugin/dist/supervisor/supervisor.mjs",
  nodeBinary: "/usr/bin/node",
  shmBytes: 64 * 1024 * 1024,
};

/** [flag, ...operands] groups of a bwrap argv, for readable assertions. */
function binds(argv: string[]): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i]!;
    if (["--bind", "--ro-bind", "--ro-bind-try", "--symlink"].includes(flag)) out.push([flag, argv[i + 1]!, argv[i + 2]!]);
  }
  return out;
}

describe("buildJailArgv", () => {
  const { argv } = buildJailArgv(layout, { infoFd: 4, configFd: 5 });

  it("isolates every namespace, maps the sandbox user to 1000 and drops all capabilities", () => {
    for (const flag of ["--unshare-all", "--unshare-user", "--disable-userns", "--new-session"]) expect(argv).toContain(flag);
    expect(argv).not.toContain("--share-net");
    // Tied to its host-side keeper (the sandbox's expiry), never to the worker.
    expect(argv).toContain("--die-with-parent");
    expect(argv.slice(argv.indexOf("--uid"), argv.indexOf("--uid") + 2)).toEqual(["--uid", "1000"]);
    expect(argv.slice(argv.indexOf("--cap-drop"), argv.indexOf("--cap-drop") + 2)).toEqual(["--cap-drop", "ALL"]);
    expect(argv.slice(argv.indexOf("--info-fd"), argv.indexOf("--info-fd") + 2)).toEqual(["--info-fd", "4"]);
  });

  it("binds only the sandbox's directories writable, and nothing of /root, /home or the host /tmp", () => {
    const writable = binds(argv).filter(([flag]) => flag === "--bind");
    expect(writable).toEqual([
      ["--bind", layout.workspaceDir, "/workspace"],
      ["--bind", layout.homeDir, "/home/sandbox"],
      ["--bind", layout.cacheDir, "/home/sandbox/.cache"],
      ["--bind", layout.tmpDir, "/tmp"],
    ]);
    const sources = binds(argv).map(([, source]) => source);
    for (const forbidden of ["/root", "/home", "/tmp", "/", "/etc", "/plugin/dist"]) expect(sources).not.toContain(forbidden);
    expect(binds(argv)).toContainEqual(["--ro-bind", layout.supervisorScript, "/opt/paperclip/supervisor.mjs"]);
    expect(binds(argv)).toContainEqual(["--ro-bind", "/plugin/dist/supervisor/in-jail", "/opt/paperclip/in-jail"]);
    expect(argv).toContain("--remount-ro");
  });

  it("runs the supervisor with node from the bound tree under the jail's own init, naming only the fd of its config (argv is world-readable)", () => {
    const tail = argv.slice(argv.indexOf("--") + 1);
    expect(tail).toEqual(["/bin/sh", "-c", JAIL_INIT_SCRIPT, "paperclip-init", "/usr/bin/node", "/opt/paperclip/supervisor.mjs", "5"]);
    expect(argv).toContain("--as-pid-1");
  });

  it("binds the egress socket directory read-only only when given", () => {
    expect(binds(argv).some(([, , dest]) => dest === "/run/paperclip-egress")).toBe(false);
    const withEgress = buildJailArgv({ ...layout, egressDir: "/state/leases/x/egress" }, { infoFd: 4, configFd: 5 }).argv;
    expect(binds(withEgress)).toContainEqual(["--ro-bind", "/state/leases/x/egress", "/run/paperclip-egress"]);
  });

  it("sizes /dev/shm (its own tmpfs) and leaves nothing else under /dev writable", () => {
    const { argv: sized } = buildJailArgv({ ...layout, shmBytes: 256 * 1024 * 1024 }, { infoFd: 4, configFd: 5 });
    const at = sized.indexOf("/dev/shm");
    expect(sized.slice(at - 5, at + 1)).toEqual(["--perms", "1777", "--size", String(256 * 1024 * 1024), "--tmpfs", "/dev/shm"]);
    expect(sized.slice(at + 1, at + 3)).toEqual(["--remount-ro", "/dev"]);
  });

  it("starts the supervisor through the execute-only loader, with the seccomp filter, when given their descriptors", () => {
    const jail = buildJailArgv({ ...layout, loaderFd: 8, seccompFd: 7 }, { infoFd: 4, configFd: 5 });
    const at = jail.options.indexOf("--ro-bind-data");
    expect(jail.options.slice(at - 2, at + 3)).toEqual(["--perms", "0111", "--ro-bind-data", "8", "/opt/paperclip/ld.so"]);
    expect(jail.options.slice(jail.options.indexOf("--seccomp"), jail.options.indexOf("--seccomp") + 2)).toEqual(["--seccomp", "7"]);
    expect(jail.command.slice(4)).toEqual(["/opt/paperclip/ld.so", "/usr/bin/node", "/opt/paperclip/supervisor.mjs", "5"]);
    expect(jail.argv).toEqual([...jail.options, "--", ...jail.command]);
  });

  it("binds the worker's node when the tree has none, and puts it on PATH", () => {
    const rootfs = fs.mkdtempSync(path.join(os.tmpdir(), "argv-rootfs-"));
    try {
      fs.mkdirSync(path.join(rootfs, "usr"));
      const jail = buildJailArgv({ ...layout, rootfs, nodeBinary: "/state/bin/node-abc" }, { infoFd: 4, configFd: 5 });
      expect(binds(jail.options)).toContainEqual(["--ro-bind", "/state/bin/node-abc", "/opt/paperclip/bin/node"]);
      expect(jail.hostNodeBinary).toBe("/state/bin/node-abc");
      expect(jail.path.split(":")).toContain("/opt/paperclip/bin");
    } finally {
      fs.rmSync(rootfs, { recursive: true, force: true });
    }
  });

  it("generates an /etc/passwd naming the sandbox user with its home", () => {
    expect(generatedEtcFiles().passwd).toContain("sandbox:x:1000:1000:Paperclip sandbox:/home/sandbox:/bin/sh");
  });
});
