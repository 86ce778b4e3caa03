// The attack review of the jail (findings 1, 3, 4, 7, 8 and 11), each reproduced through the built
// worker as the host drives it; each passes only with its fix. Also re-run as uid 65534 by
// nobody.test.ts (the root-only findings skip there). Findings 5 and 9 (what the host's /proc shows,
// what the worker inherited) and the protocol side of 1 are tested on the backend
// (packages/sandbox-backend/src/jail-attacks.test.ts, supervisor-trust.test.ts).
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginEnvironmentLease } from "@paperclipai/plugin-sdk";
import { isStopped, supervisorPidOf } from "@paperclip-sandbox/sandbox-backend/test-support";
import { hostProcessesMatching, startHarness, type Harness } from "./test-support/harness.js";

const isRoot = process.getuid?.() === 0;
const hasPerl = fs.existsSync("/usr/bin/perl");
const hasStrace = fs.existsSync("/usr/bin/strace");

let h: Harness;
let lease: PluginEnvironmentLease;
let leaseDir: string;

beforeAll(async () => {
  h = await startHarness();
  lease = await h.acquire();
  leaseDir = path.join(h.stateDir, "leases", lease.providerLeaseId!);
});

afterAll(async () => {
  await h?.close();
});

const supervisor = () => {
  const pid = supervisorPidOf(leaseDir);
  if (pid === null) throw new Error("the lease has no supervisor");
  return pid;
};

/** Fails if the supervisor no longer answers (a stopped or taken-over supervisor would not). */
async function supervisorAnswers(): Promise<void> {
  const result = await h.sh(lease, "echo genuine; exit 3", { timeoutMs: 10_000 });
  expect({ stdout: result.stdout, exitCode: result.exitCode }).toEqual({ stdout: "genuine\n", exitCode: 3 });
}

describe("the supervisor's control socket and process are out of the sandbox's reach", () => {
  it.skipIf(!hasPerl)("pidfd_open + pidfd_getfd(pid 2, fd 3) does not hand sandboxed code the listening socket", async () => {
    const result = await h.sh(
      lease,
      String.raw`perl -e '
        my $pidfd = syscall(434, 2, 0);
        print "pidfd_open: ", ($pidfd >= 0 ? "fd $pidfd" : "refused ($!)"), "\n";
        for my $target (3, 0, 1, 2) {
          my $fd = $pidfd >= 0 ? syscall(438, $pidfd, $target, 0) : -1;
          print "STOLE fd $target as $fd\n" if $fd >= 0;
        }'`,
    );
    expect(result.stdout).toMatch(/pidfd_open: refused \(Function not implemented\)/);
    expect(result.stdout).not.toContain("STOLE");
    await supervisorAnswers();
  });

  it.skipIf(!hasStrace)("strace -p 2 (ptrace) cannot attach to the supervisor, nor to another command", async () => {
    const result = await h.sh(lease, "sleep 30 & other=$!; for pid in 2 $other; do timeout 3 strace -e trace=none -p $pid 2>&1 | head -2; done; kill $other");
    expect(result.stdout).not.toMatch(/attached/i);
    expect(result.stdout).toMatch(/attach: ptrace\(PTRACE_\w+, 2\): Operation not permitted/);
    await supervisorAnswers();
  });

  it("the supervisor's memory, environment and descriptors cannot be read from /proc/2, nor with process_vm_readv", async () => {
    const result = await h.sh(
      lease,
      [
        "cat /proc/2/environ >/dev/null 2>&1 && echo ENVIRON-READ",
        "ls /proc/2/fd/ >/dev/null 2>&1 && ls /proc/2/fd/3 >/dev/null 2>&1 && echo FD-LISTED",
        "readlink /proc/2/fd/3 >/dev/null 2>&1 && echo FD-NAMED",
        "dd if=/proc/2/mem of=/dev/null bs=1 count=1 skip=4194304 2>/dev/null && echo MEM-READ",
        hasPerl
          ? `perl -e 'my $b = "\\0" x 8; my $l = pack("QQ", unpack("Q", pack("P", $b)), 8); my $r = pack("QQ", 4194304, 8); my $n = syscall(310, 2, $l, 1, $r, 1, 0); print $n >= 0 ? "VM-READ\\n" : "process_vm_readv: $!\\n"'`
          : "true",
        "echo done",
      ].join("\n"),
    );
    expect(result.stdout).not.toMatch(/ENVIRON-READ|FD-LISTED|FD-NAMED|MEM-READ|VM-READ/);
    if (hasPerl) expect(result.stdout).toContain("process_vm_readv: Operation not permitted");
    expect(result.stdout).toMatch(/done\n$/);
  });

  it("kill -STOP 2, to its threads and its process group, does not stop the supervisor; kill -KILL 2 does not end the jail", async () => {
    const pid = supervisor();
    try {
      const result = await h.sh(
        lease,
        "for sig in STOP KILL TERM; do kill -$sig 2 2>/dev/null && echo SIGNALLED-2-$sig; kill -$sig -- -2 2>/dev/null && echo SIGNALLED-GROUP-$sig; done; for t in $(seq 1 24); do kill -STOP $t 2>/dev/null && echo SIGNALLED-$t; done; echo done",
      );
      expect(result.stdout).toBe("done\n");
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(isStopped(pid)).toBe(false);
      expect(supervisor()).toBe(pid);
      await supervisorAnswers();
    } finally {
      // Only ever needed without the fix: leave the lease usable for the next tests.
      if (isStopped(pid)) process.kill(pid, "SIGCONT");
    }
  });

  it("SIGUSR1 does not open Node's inspector in the supervisor", async () => {
    const result = await h.sh(
      lease,
      `kill -USR1 2 2>/dev/null; sleep 0.5; node -e 'require("net").connect(9229, "127.0.0.1").on("connect", () => { console.log("INSPECTOR OPEN"); process.exit(0); }).on("error", () => console.log("no inspector"))'`,
    );
    expect(result.stdout).toBe("no inspector\n");
  });

  it("commands get pids above the guarded ones, and signal each other as usual", async () => {
    const result = await h.sh(lease, 'sleep 30 & child=$!; kill $child && wait $child; echo "status $? child $child self $$"');
    const match = /status (\d+) child (\d+) self (\d+)/.exec(result.stdout);
    expect(match?.[1]).toBe("143");
    expect(Number(match?.[2])).toBeGreaterThan(24);
    expect(Number(match?.[3])).toBeGreaterThan(24);
  });
});

describe.skipIf(!isRoot)("with a root worker the sandbox user is not host root", () => {
  let secretDir: string;
  beforeAll(() => {
    // A root-only file under a bound host tree, as a private key under /etc/ssl would be.
    secretDir = fs.mkdtempSync("/etc/ssl/paperclip-attack-");
    fs.chmodSync(secretDir, 0o700);
    fs.writeFileSync(path.join(secretDir, "private.key"), "root-only-secret", { mode: 0o600 });
  });
  afterAll(() => {
    if (secretDir) fs.rmSync(secretDir, { recursive: true, force: true });
  });

  it("root-only files of the bound host trees are not readable", async () => {
    const result = await h.sh(lease, `cat ${secretDir}/private.key 2>&1; ls /etc/ssl/private >/dev/null 2>&1 && echo LISTED-PRIVATE; echo done`);
    expect(result.stdout).not.toContain("root-only-secret");
    expect(result.stdout).not.toContain("LISTED-PRIVATE");
    expect(result.stdout).toMatch(/Permission denied/);
  });

  it("a setuid copy of sh left in /workspace is not owned by host root, and no other host user can reach it", async () => {
    await h.sh(lease, "cp /bin/sh /workspace/x && chmod 4755 /workspace/x");
    const file = fs
      .readdirSync(leaseDir, { recursive: true })
      .map(String)
      .find((name) => name.endsWith("workspace/x"))!;
    const stat = fs.statSync(path.join(leaseDir, file));
    expect(stat.mode & 0o4000).toBe(0o4000);
    expect(stat.uid).not.toBe(0);
    // Its directory's parent admits only that (unprivileged) user.
    const parent = fs.statSync(path.dirname(path.dirname(path.join(leaseDir, file))));
    expect(parent.uid).toBe(stat.uid);
    expect(parent.mode & 0o077).toBe(0);
  });
});

describe.skipIf(!hasPerl)("the worker's session keyring", () => {
  it("is not readable from the sandbox (request_key, KEYCTL_SEARCH + KEYCTL_READ)", async () => {
    // A worker with a session keyring holding a key, as one started from a login session has:
    // started through a wrapper that joins a fresh session keyring, adds the key, then execs node.
    const description = `paperclip-attack-${process.pid}`;
    const wrapperDir = fs.mkdtempSync(path.join("/var/tmp", "bwrap-keyring-"));
    const wrapper = path.join(wrapperDir, "node-with-keyring");
    fs.writeFileSync(
      wrapper,
      `#!/bin/sh\nexec /usr/bin/perl -e 'syscall(250, 1, 0) >= 0 or die "join: $!"; my ($t, $d, $v) = ("user", "${description}", "keyring-secret-value"); syscall(248, $t, $d, $v, length($v), -3) > 0 or die "add_key: $!"; exec { $ARGV[0] } @ARGV or die "exec: $!"' ${JSON.stringify(fs.realpathSync(process.execPath))} "$@"\n`,
      { mode: 0o755 },
    );
    fs.chmodSync(wrapperDir, 0o755);
    const keyed = await startHarness({ nodePath: wrapper });
    try {
      const target = await keyed.acquire();
      const result = await keyed.sh(
        target,
        String.raw`perl -e '
          my ($type, $name) = ("user", "${description}");
          my $id = syscall(249, $type, $name, 0, 0);
          print "request_key: ", ($id > 0 ? "key $id" : "refused ($!)"), "\n";
          $id = syscall(250, 10, -3, $type, $name, 0) if $id <= 0;
          my $buf = "\0" x 64;
          my $n = $id > 0 ? syscall(250, 11, $id, $buf, 64) : -1;
          print "READ ", substr($buf, 0, $n), "\n" if $n > 0;
          print "keyctl: ", (syscall(250, 0, -3, 0) >= 0 ? "session keyring reachable" : "refused ($!)"), "\n";'`,
      );
      expect(result.stdout).not.toContain("keyring-secret-value");
      expect(result.stdout).toContain("request_key: refused (Function not implemented)");
      expect(result.stdout).toContain("keyctl: refused (Function not implemented)");
      await keyed.release(target);
    } finally {
      await keyed.close();
      fs.rmSync(wrapperDir, { recursive: true, force: true });
    }
  });
});

describe("a plain release while sandboxed code tries to stall the supervisor", () => {
  it("returns its receipt: the in-flight command finishes, the supervisor was never stopped", async () => {
    const target = await h.acquire();
    const dir = path.join(h.stateDir, "leases", target.providerLeaseId!);
    const pid = supervisorPidOf(dir)!;
    try {
      const work = h.client.env.execute({ ...h.base(), lease: target, command: "sh", args: ["-c", "(sleep 0.3; kill -STOP 2) & sleep 1.5; echo finished"], timeoutMs: 30_000 });
      await new Promise((resolve) => setTimeout(resolve, 700));
      const started = Date.now();
      const receipt = await h.release(target);
      expect(receipt).toMatchObject({ providerLeaseId: target.providerLeaseId, state: "destroyed" });
      // A bound far from the alternative (a slow machine is not a failure): a stalled supervisor holds the release until the command's 30 s timeout.
      expect(Date.now() - started).toBeLessThan(20_000);
      expect((await work).stdout).toBe("finished\n");
    } finally {
      if (isStopped(pid)) process.kill(pid, "SIGCONT");
    }
  });
});

describe("memory held by the sandbox outside its processes", () => {
  it("/dev/shm is a small tmpfs of its own (64 MiB without a memory limit) and nothing else under /dev is writable", async () => {
    const result = await h.sh(
      lease,
      "head -c 100000000 /dev/zero > /dev/shm/fill 2>/dev/null; wc -c < /dev/shm/fill; rm -f /dev/shm/fill; touch /dev/paperclip-x 2>/dev/null && echo DEV-WRITABLE; echo done",
    );
    const written = Number(result.stdout.split("\n")[0]);
    expect(written).toBeLessThanOrEqual(64 * 1024 * 1024);
    expect(written).toBeGreaterThan(60 * 1024 * 1024);
    expect(result.stdout).not.toContain("DEV-WRITABLE");
  });

  it.skipIf(!isRoot)("with a memory limit, /dev/shm is half of it (its pages count against the limit)", async () => {
    const limited = { ...h.config, memoryMb: 256 };
    const shm = await h.acquire({}, limited);
    const result = await h.client.env.execute({ ...h.base(limited), lease: shm, command: "sh", args: ["-c", "df -k /dev/shm | tail -1"] });
    expect(Number(result.stdout.trim().split(/\s+/)[1])).toBe(128 * 1024);
    await h.release(shm);
  });
});

describe("what the host shows of a jail", () => {
  it("sandboxed code cannot write to the host's jail.log through the jail's init (/proc/1/fd/1, /proc/1/fd/2)", async () => {
    const marker = `log-injection-${process.pid}`;
    const result = await h.sh(lease, `for fd in /proc/1/fd/*; do echo "$fd $(readlink $fd)"; (echo ${marker} >> $fd) 2>/dev/null; done`);
    // The jail's init keeps nothing but /dev/null (it is not bwrap's init, which kept bwrap's stdio).
    expect(result.stdout.trim().split("\n")).toEqual(["/proc/1/fd/0 /dev/null", "/proc/1/fd/1 /dev/null", "/proc/1/fd/2 /dev/null"]);
    expect(fs.readFileSync(path.join(leaseDir, "jail.log"), "utf8")).not.toContain(marker);
  });

  it("bwrap's options (binds, host paths) are not in the host's ps; only the keeper names the lease, by its deadline file", async () => {
    const naming = hostProcessesMatching(leaseDir);
    const cmdlines = naming.map((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"));
    expect(cmdlines.length).toBeGreaterThan(0);
    for (const argv of cmdlines) expect(argv.slice(0, 2)).toEqual(["/bin/sh", "-c"]);
    const bwraps = hostProcessesMatching("bwrap --args").filter((pid) => fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0]!.endsWith("bwrap"));
    expect(bwraps.length).toBeGreaterThan(0);
    for (const pid of bwraps) expect(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toMatch(/--bind|--ro-bind|leases\//);
  });
});
