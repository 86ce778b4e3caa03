import { describe, expect, it } from "vitest";
import { AUDIT_ARCH_OF, buildSeccompProgram, evaluateSeccomp, GUARDED_PID_MAX, SECCOMP_POLICY, syscallNumber, type SeccompArch } from "./seccomp.js";

const EPERM = { errno: 1 };
const ENOSYS = { errno: 38 };

for (const arch of ["x86_64", "aarch64"] as SeccompArch[]) {
  describe(`seccomp filter (${arch})`, () => {
    const program = buildSeccompProgram(arch);
    const call = (name: string, ...args: Array<number | bigint>) => {
      const nr = syscallNumber(arch, name);
      if (nr === undefined) throw new Error(`no ${name} on ${arch}`);
      return evaluateSeccomp(program, { arch: AUDIT_ARCH_OF[arch], nr, args });
    };

    it("compiles to a program bwrap accepts (whole instructions, at most 4096)", () => {
      expect(program.length % 8).toBe(0);
      expect(program.length / 8).toBeLessThanOrEqual(4096);
    });

    it("refuses ptrace, process_vm_*, kcmp, every pidfd call and the keyrings, whatever the target", () => {
      expect(call("ptrace", 16, 2)).toEqual(EPERM);
      expect(call("ptrace", 0x4206, 5000)).toEqual(EPERM);
      expect(call("process_vm_readv", 2)).toEqual(EPERM);
      expect(call("process_vm_writev", 5000)).toEqual(EPERM);
      expect(call("kcmp", 2, 3)).toEqual(EPERM);
      for (const name of ["pidfd_open", "pidfd_send_signal", "pidfd_getfd", "keyctl", "add_key", "request_key"]) expect(call(name, 5000, 3)).toEqual(ENOSYS);
    });

    it("refuses signals to the guarded pids, their groups and -1, and allows every other target", () => {
      for (let pid = 1; pid <= GUARDED_PID_MAX; pid += 1) {
        expect(call("kill", pid, 19)).toEqual(EPERM);
        expect(call("kill", -pid, 19)).toEqual(EPERM);
        expect(call("tkill", pid, 19)).toEqual(EPERM);
        expect(call("tgkill", 5000, pid, 19)).toEqual(EPERM);
        expect(call("tgkill", pid, 5000, 19)).toEqual(EPERM);
        expect(call("rt_sigqueueinfo", pid, 10, 0)).toEqual(EPERM);
        expect(call("rt_tgsigqueueinfo", pid, pid, 10, 0)).toEqual(EPERM);
      }
      expect(call("kill", -1, 9)).toEqual(EPERM);
      // The kernel reads a pid_t: the upper half of the register must not smuggle a guarded pid past the filter.
      expect(call("kill", 0xdead_beef_0000_0002n, 19)).toEqual(EPERM);
      expect(call("kill", 0, 15)).toBe("allow");
      expect(call("kill", GUARDED_PID_MAX + 1, 15)).toBe("allow");
      expect(call("kill", -(GUARDED_PID_MAX + 1), 15)).toBe("allow");
      expect(call("kill", 4_000_000, 9)).toBe("allow");
      expect(call("tgkill", 300, 301, 6)).toBe("allow");
    });

    it("refuses the same-uid controls aimed at guarded pids (priority, scheduling, affinity, rlimits, pages)", () => {
      for (const name of ["sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr", "prlimit64", "migrate_pages", "move_pages"]) {
        expect(call(name, 2)).toEqual(EPERM);
        expect(call(name, 0)).toBe("allow");
        expect(call(name, 777)).toBe("allow");
      }
      expect(call("setpriority", 0, 2, 19)).toEqual(EPERM);
      expect(call("setpriority", 1, 2, 19)).toEqual(EPERM);
      expect(call("setpriority", 2, 1000, 19)).toEqual(EPERM); // PRIO_USER: every process of the uid
      expect(call("setpriority", 0, 0, 5)).toBe("allow");
      expect(call("setpriority", 0, 900, 5)).toBe("allow");
      expect(call("ioprio_set", 3, 1000, 0)).toEqual(EPERM);
      expect(call("ioprio_set", 1, 2, 0)).toEqual(EPERM);
      expect(call("ioprio_set", 1, 0, 0)).toBe("allow");
    });

    it("refuses SIGIO ownership of the supervisor (F_SETOWN to a guarded pid, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP) and allows other fcntl/ioctl", () => {
      expect(call("fcntl", 3, 8, 2)).toEqual(EPERM);
      expect(call("fcntl", 3, 8, -2)).toEqual(EPERM);
      expect(call("fcntl", 3, 8, 4000)).toBe("allow");
      expect(call("fcntl", 3, 15, 0)).toEqual(EPERM);
      expect(call("fcntl", 3, 4, 0o4000)).toBe("allow"); // F_SETFL O_NONBLOCK
      expect(call("ioctl", 3, 0x8901, 0)).toEqual(EPERM);
      expect(call("ioctl", 3, 0x8902, 0)).toEqual(EPERM);
      expect(call("ioctl", 3, 0x5421, 0)).toBe("allow"); // FIONBIO
    });

    it("refuses AF_VSOCK sockets and allows the others", () => {
      expect(call("socket", 40, 1, 0)).toEqual({ errno: 97 });
      expect(call("socket", 2, 1, 0)).toBe("allow");
      expect(call("socket", 1, 1, 0)).toBe("allow");
      expect(call("socket", 10, 2, 0)).toBe("allow");
    });

    it("refuses every listed syscall and allows ordinary ones", () => {
      for (const { name, rule } of SECCOMP_POLICY) {
        if (rule.kind !== "deny" || syscallNumber(arch, name) === undefined) continue;
        expect(call(name, 0, 0), name).not.toBe("allow");
      }
      const ordinary: Record<SeccompArch, number[]> = { x86_64: [0, 1, 2, 3, 9, 56, 57, 59, 61, 231, 257, 435], aarch64: [63, 64, 56, 57, 220, 221, 222, 260, 94, 435] };
      for (const nr of ordinary[arch]) expect(evaluateSeccomp(program, { arch: AUDIT_ARCH_OF[arch], nr, args: [2, 2, 2] }), String(nr)).toBe("allow");
    });

    it("ends a process that uses another ABI's syscalls", () => {
      expect(evaluateSeccomp(program, { arch: 0x40000003, nr: 1 })).toBe("kill"); // i386
      expect(evaluateSeccomp(program, { arch: 0x40000028, nr: 1 })).toBe("kill"); // arm
    });
  });
}

describe("seccomp filter (x86_64 only)", () => {
  it("refuses x32 syscalls (their numbers are not the ones described)", () => {
    const program = buildSeccompProgram("x86_64");
    expect(evaluateSeccomp(program, { arch: AUDIT_ARCH_OF.x86_64, nr: 0x40000000 + 521 })).toEqual(ENOSYS);
    expect(evaluateSeccomp(program, { arch: AUDIT_ARCH_OF.x86_64, nr: 0x40000000 + 1 })).toEqual(ENOSYS);
  });
});

describe("seccomp policy documentation", () => {
  it("the README's table names every syscall the filter refuses", async () => {
    const fs = await import("node:fs");
    const readme = fs.readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const missing = SECCOMP_POLICY.map(({ name }) => name).filter((name) => !readme.includes(`\`${name}\``));
    expect(missing).toEqual([]);
  });
});
