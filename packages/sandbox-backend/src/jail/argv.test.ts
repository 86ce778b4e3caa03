import { describe, expect, it } from "vitest";
import { buildJailArgv, generatedEtcFiles } from "./argv.js";

const layout = {
  workspaceDir: "/state/leases/x/workspace",
  homeDir: "/state/leases/x/home",
  cacheDir: "/state/leases/x/cache",
  tmpDir: "/state/leases/x/tmp",
  etcDir: "/state/leases/x/etc",
  supervisorScript: "/plugin/dist/supervisor/supervisor.mjs",
  nodeBinary: "/usr/bin/node",
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

  it("runs the supervisor with node from the bound tree, naming only the fd of its config (argv is world-readable)", () => {
    const tail = argv.slice(argv.indexOf("--") + 1);
    expect(tail).toEqual(["/usr/bin/node", "/opt/paperclip/supervisor.mjs", "5"]);
  });

  it("binds the egress socket directory read-only only when given", () => {
    expect(binds(argv).some(([, , dest]) => dest === "/run/paperclip-egress")).toBe(false);
    const withEgress = buildJailArgv({ ...layout, egressDir: "/state/leases/x/egress" }, { infoFd: 4, configFd: 5 }).argv;
    expect(binds(withEgress)).toContainEqual(["--ro-bind", "/state/leases/x/egress", "/run/paperclip-egress"]);
  });

  it("generates an /etc/passwd naming the sandbox user with its home", () => {
    expect(generatedEtcFiles().passwd).toContain("sandbox:x:1000:1000:Paperclip sandbox:/home/sandbox:/bin/sh");
  });
});
