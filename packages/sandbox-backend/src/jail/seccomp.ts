/**
 * The seccomp filter of every process in a jail (the supervisor and the commands it starts),
 * handed to bubblewrap as a compiled classic-BPF program (`--seccomp FD`). It refuses:
 * - what reaches into another process: ptrace, process_vm_readv/writev, kcmp, the pidfd calls;
 * - signals, and the other same-uid levers (priority, scheduling, affinity, rlimits, page
 *   migration, SIGIO ownership), aimed at the guarded pids: the jail's init (1), the supervisor
 *   (2) and its threads, which the supervisor keeps at or below GUARDED_PID_MAX (it uses pids up to
 *   there before it serves anything, so no command ever gets one; after a wrap the kernel resumes at
 *   300), their process groups, and -1 (every process);
 * - the kernel keyrings (the worker's session keyring would otherwise be readable);
 * - kernel surface ordinary developer tools do not need (io_uring, bpf, perf_event_open,
 *   userfaultfd, AF_VSOCK sockets, which no network namespace confines) and administration calls
 *   the sandbox has no capability for anyway (mount, modules, reboot, clock, swap, ...);
 * - every syscall of another ABI (i386 and x32 on x86_64 end the process / fail), whose numbers
 *   this filter does not describe.
 * Only x86_64 and aarch64 are described; elsewhere the jail runs without a filter (reported).
 */

export type SeccompArch = "x86_64" | "aarch64";

/** The jail's init, the supervisor and its threads all have pids in [1, GUARDED_PID_MAX]. */
export const GUARDED_PID_MAX = 24;

const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 };
const X32_SYSCALL_BIT = 0x40000000;

const ERRNO = { EPERM: 1, ENOSYS: 38, EAFNOSUPPORT: 97 } as const;
type ErrnoName = keyof typeof ERRNO;

const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
const RET_KILL_PROCESS = 0x80000000;

/** seccomp_data: nr u32 @0, arch u32 @4, instruction_pointer u64 @8, args u64[6] @16 (little-endian on both arches). */
const NR = 0;
const ARCH = 4;
const argLow = (index: number) => 16 + 8 * index;

// Classic BPF opcodes.
const LD_W_ABS = 0x20;
const JMP_JA = 0x05;
const JMP_JEQ_K = 0x15;
const JMP_JGT_K = 0x25;
const JMP_JGE_K = 0x35;
const RET_K = 0x06;

/** How a syscall is filtered. */
type SyscallRule =
  | { kind: "deny"; errno: ErrnoName }
  /** Refused when any of these arguments (low 32 bits, as the kernel reads a pid_t) is a guarded pid, its group or -1. */
  | { kind: "guard-pids"; args: number[] }
  /** setpriority / ioprio_set: `which` (arg 0) naming a user is refused; otherwise arg 1 is a pid or group. */
  | { kind: "guard-who"; userWhich: number }
  /** fcntl: F_SETOWN (8) to a guarded pid or group, and F_SETOWN_EX (15, a struct we cannot read), are refused. */
  | { kind: "fcntl" }
  /** ioctl: FIOSETOWN and SIOCSPGRP (their pid is behind a pointer) are refused. */
  | { kind: "ioctl" }
  /** socket: the families in `families` are refused with EAFNOSUPPORT. */
  | { kind: "socket"; families: number[] };

export interface FilteredSyscall {
  name: string;
  rule: SyscallRule;
  why: string;
}

const PID_GUARD_WHY = "signals and same-uid controls aimed at the supervisor, its threads or the jail's init";
const deny = (errno: ErrnoName, why: string, ...names: string[]): FilteredSyscall[] => names.map((name) => ({ name, rule: { kind: "deny", errno }, why }));

/** The policy, one entry per syscall (the README lists it from here). */
export const SECCOMP_POLICY: readonly FilteredSyscall[] = [
  ...deny("EPERM", "reads or writes another process", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp"),
  ...deny("ENOSYS", "pidfds name processes (e.g. /proc/2) without a pid the filter could check", "pidfd_open", "pidfd_send_signal", "pidfd_getfd"),
  ...deny("ENOSYS", "the kernel keyrings (the worker's session keyring)", "keyctl", "add_key", "request_key"),
  { name: "kill", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "tkill", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "tgkill", rule: { kind: "guard-pids", args: [0, 1] }, why: PID_GUARD_WHY },
  { name: "rt_sigqueueinfo", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "rt_tgsigqueueinfo", rule: { kind: "guard-pids", args: [0, 1] }, why: PID_GUARD_WHY },
  { name: "sched_setparam", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "sched_setscheduler", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "sched_setaffinity", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "sched_setattr", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "prlimit64", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "migrate_pages", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "move_pages", rule: { kind: "guard-pids", args: [0] }, why: PID_GUARD_WHY },
  { name: "setpriority", rule: { kind: "guard-who", userWhich: 2 }, why: `${PID_GUARD_WHY}; PRIO_USER reaches every process of the uid` },
  { name: "ioprio_set", rule: { kind: "guard-who", userWhich: 3 }, why: `${PID_GUARD_WHY}; IOPRIO_WHO_USER reaches every process of the uid` },
  { name: "fcntl", rule: { kind: "fcntl" }, why: "F_SETOWN/F_SETOWN_EX would have the kernel signal the supervisor (SIGIO/F_SETSIG)" },
  { name: "ioctl", rule: { kind: "ioctl" }, why: "FIOSETOWN/SIOCSPGRP: the same as F_SETOWN" },
  { name: "socket", rule: { kind: "socket", families: [40] }, why: "AF_VSOCK reaches the hypervisor's host past every network namespace" },
  ...deny("ENOSYS", "large kernel surface ordinary tools do without (io_uring falls back to epoll/threads)", "io_uring_setup", "io_uring_enter", "io_uring_register"),
  ...deny("EPERM", "large kernel surface ordinary tools do without", "bpf", "perf_event_open", "userfaultfd"),
  ...deny(
    "EPERM",
    "administration the sandbox has no capability for (refused before the kernel's own checks)",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    "swapon",
    "swapoff",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "syslog",
    "vhangup",
  ),
  ...deny("EPERM", "x86 port I/O and legacy calls", "iopl", "ioperm", "uselib", "_sysctl"),
];

/** Syscall numbers per arch (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h). Absent: not on that arch. */
const NUMBERS: Record<string, Partial<Record<SeccompArch, number>>> = {
  ptrace: { x86_64: 101, aarch64: 117 },
  process_vm_readv: { x86_64: 310, aarch64: 270 },
  process_vm_writev: { x86_64: 311, aarch64: 271 },
  kcmp: { x86_64: 312, aarch64: 272 },
  pidfd_open: { x86_64: 434, aarch64: 434 },
  pidfd_send_signal: { x86_64: 424, aarch64: 424 },
  pidfd_getfd: { x86_64: 438, aarch64: 438 },
  keyctl: { x86_64: 250, aarch64: 219 },
  add_key: { x86_64: 248, aarch64: 217 },
  request_key: { x86_64: 249, aarch64: 218 },
  kill: { x86_64: 62, aarch64: 129 },
  tkill: { x86_64: 200, aarch64: 130 },
  tgkill: { x86_64: 234, aarch64: 131 },
  rt_sigqueueinfo: { x86_64: 129, aarch64: 138 },
  rt_tgsigqueueinfo: { x86_64: 297, aarch64: 240 },
  sched_setparam: { x86_64: 142, aarch64: 118 },
  sched_setscheduler: { x86_64: 144, aarch64: 119 },
  sched_setaffinity: { x86_64: 203, aarch64: 122 },
  sched_setattr: { x86_64: 314, aarch64: 274 },
  prlimit64: { x86_64: 302, aarch64: 261 },
  migrate_pages: { x86_64: 256, aarch64: 238 },
  move_pages: { x86_64: 279, aarch64: 239 },
  setpriority: { x86_64: 141, aarch64: 140 },
  ioprio_set: { x86_64: 251, aarch64: 30 },
  fcntl: { x86_64: 72, aarch64: 25 },
  ioctl: { x86_64: 16, aarch64: 29 },
  socket: { x86_64: 41, aarch64: 198 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
  bpf: { x86_64: 321, aarch64: 280 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  userfaultfd: { x86_64: 323, aarch64: 282 },
  mount: { x86_64: 165, aarch64: 40 },
  umount2: { x86_64: 166, aarch64: 39 },
  pivot_root: { x86_64: 155, aarch64: 41 },
  move_mount: { x86_64: 429, aarch64: 429 },
  open_tree: { x86_64: 428, aarch64: 428 },
  fsopen: { x86_64: 430, aarch64: 430 },
  fsconfig: { x86_64: 431, aarch64: 431 },
  fsmount: { x86_64: 432, aarch64: 432 },
  fspick: { x86_64: 433, aarch64: 433 },
  mount_setattr: { x86_64: 442, aarch64: 442 },
  setns: { x86_64: 308, aarch64: 268 },
  swapon: { x86_64: 167, aarch64: 224 },
  swapoff: { x86_64: 168, aarch64: 225 },
  reboot: { x86_64: 169, aarch64: 142 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  init_module: { x86_64: 175, aarch64: 105 },
  finit_module: { x86_64: 313, aarch64: 273 },
  delete_module: { x86_64: 176, aarch64: 106 },
  acct: { x86_64: 163, aarch64: 89 },
  settimeofday: { x86_64: 164, aarch64: 170 },
  clock_settime: { x86_64: 227, aarch64: 112 },
  clock_adjtime: { x86_64: 305, aarch64: 266 },
  quotactl: { x86_64: 179, aarch64: 60 },
  quotactl_fd: { x86_64: 443, aarch64: 443 },
  open_by_handle_at: { x86_64: 304, aarch64: 265 },
  syslog: { x86_64: 103, aarch64: 116 },
  vhangup: { x86_64: 153, aarch64: 58 },
  iopl: { x86_64: 172 },
  ioperm: { x86_64: 173 },
  uselib: { x86_64: 134 },
  _sysctl: { x86_64: 156 },
};

const F_SETOWN = 8;
const F_SETOWN_EX = 15;
const FIOSETOWN = 0x8901;
const SIOCSPGRP = 0x8902;

/** The arch this process runs on, as the filter names it; null when the filter has no table for it. */
export function seccompArch(nodeArch: string = process.arch): SeccompArch | null {
  if (nodeArch === "x64") return "x86_64";
  if (nodeArch === "arm64") return "aarch64";
  return null;
}

/** A syscall number of `arch`, or undefined when the syscall does not exist there. */
export function syscallNumber(arch: SeccompArch, name: string): number | undefined {
  return NUMBERS[name]?.[arch];
}

// --- a tiny classic-BPF assembler with labels -------------------------------------------------

type Target = string | number;
interface Instruction {
  code: number;
  k: number;
  /** Labels (or 0 for the next instruction) of a conditional jump's true / false branches. */
  jt?: Target;
  jf?: Target;
  /** Label of an unconditional jump. */
  to?: string;
  label?: string;
}

class Assembler {
  private readonly code: Instruction[] = [];
  private labels = 0;

  newLabel(): string {
    this.labels += 1;
    return `L${this.labels}`;
  }

  mark(label: string): void {
    this.code.push({ code: -1, k: 0, label });
  }

  load(offset: number): void {
    this.code.push({ code: LD_W_ABS, k: offset });
  }

  jump(code: number, k: number, jt: Target, jf: Target): void {
    this.code.push({ code, k: k >>> 0, jt, jf });
  }

  goto(label: string): void {
    this.code.push({ code: JMP_JA, k: 0, to: label });
  }

  ret(value: number): void {
    this.code.push({ code: RET_K, k: value >>> 0 });
  }

  /** struct sock_filter[] { u16 code; u8 jt; u8 jf; u32 k; }, little-endian. */
  assemble(): Buffer {
    const positions = new Map<string, number>();
    const real: Instruction[] = [];
    for (const instruction of this.code) {
      if (instruction.code === -1) positions.set(instruction.label!, real.length);
      else real.push(instruction);
    }
    const offset = (from: number, target: Target): number => {
      if (typeof target === "number") return target;
      const to = positions.get(target);
      if (to === undefined) throw new Error(`seccomp assembler: unknown label ${target}`);
      const distance = to - from - 1;
      if (distance < 0) throw new Error("seccomp assembler: backward jump");
      return distance;
    };
    if (real.length > 4096) throw new Error(`seccomp program too long (${real.length} instructions)`);
    const out = Buffer.alloc(real.length * 8);
    real.forEach((instruction, index) => {
      let { k } = instruction;
      let jt = 0;
      let jf = 0;
      if (instruction.to !== undefined) k = offset(index, instruction.to);
      if (instruction.jt !== undefined) jt = offset(index, instruction.jt);
      if (instruction.jf !== undefined) jf = offset(index, instruction.jf);
      if (jt > 255 || jf > 255) throw new Error("seccomp assembler: conditional jump too far");
      out.writeUInt16LE(instruction.code, index * 8);
      out.writeUInt8(jt, index * 8 + 2);
      out.writeUInt8(jf, index * 8 + 3);
      out.writeUInt32LE(k >>> 0, index * 8 + 4);
    });
    return out;
  }
}

const errnoOf = (name: ErrnoName) => RET_ERRNO | ERRNO[name];

/**
 * Accumulator holds a 32-bit pid-like value: refuse 1..GUARDED_PID_MAX and -GUARDED_PID_MAX..-1
 * (0 is the caller itself or its own group). Falls through to `next` when it is not guarded.
 */
function guardLoadedPid(asm: Assembler, next: string): void {
  const deny = asm.newLabel();
  const negative = asm.newLabel();
  asm.jump(JMP_JEQ_K, 0, next, 0);
  asm.jump(JMP_JGT_K, GUARDED_PID_MAX, negative, deny);
  asm.mark(negative);
  asm.jump(JMP_JGE_K, 2 ** 32 - GUARDED_PID_MAX, deny, next);
  asm.mark(deny);
  asm.ret(errnoOf("EPERM"));
}

/** Emits the checks of one rule; the accumulator holds the syscall number on entry; always ends in a ret. */
function emitRule(asm: Assembler, rule: SyscallRule): void {
  switch (rule.kind) {
    case "deny":
      asm.ret(errnoOf(rule.errno));
      return;
    case "guard-pids": {
      for (const index of rule.args) {
        const next = asm.newLabel();
        asm.load(argLow(index));
        guardLoadedPid(asm, next);
        asm.mark(next);
      }
      asm.ret(RET_ALLOW);
      return;
    }
    case "guard-who": {
      const allow = asm.newLabel();
      const byPid = asm.newLabel();
      asm.load(argLow(0));
      asm.jump(JMP_JEQ_K, rule.userWhich, 0, byPid);
      asm.ret(errnoOf("EPERM"));
      asm.mark(byPid);
      asm.load(argLow(1));
      guardLoadedPid(asm, allow);
      asm.mark(allow);
      asm.ret(RET_ALLOW);
      return;
    }
    case "fcntl": {
      const allow = asm.newLabel();
      const notSetOwn = asm.newLabel();
      asm.load(argLow(1));
      asm.jump(JMP_JEQ_K, F_SETOWN_EX, 0, notSetOwn);
      asm.ret(errnoOf("EPERM"));
      asm.mark(notSetOwn);
      asm.jump(JMP_JEQ_K, F_SETOWN, 0, allow);
      asm.load(argLow(2));
      guardLoadedPid(asm, allow);
      asm.mark(allow);
      asm.ret(RET_ALLOW);
      return;
    }
    case "ioctl": {
      const refuse = asm.newLabel();
      const allow = asm.newLabel();
      asm.load(argLow(1));
      asm.jump(JMP_JEQ_K, FIOSETOWN, refuse, 0);
      asm.jump(JMP_JEQ_K, SIOCSPGRP, refuse, allow);
      asm.mark(refuse);
      asm.ret(errnoOf("EPERM"));
      asm.mark(allow);
      asm.ret(RET_ALLOW);
      return;
    }
    case "socket": {
      const allow = asm.newLabel();
      asm.load(argLow(0));
      for (const family of rule.families) {
        const next = asm.newLabel();
        asm.jump(JMP_JEQ_K, family, 0, next);
        asm.ret(errnoOf("EAFNOSUPPORT"));
        asm.mark(next);
      }
      asm.mark(allow);
      asm.ret(RET_ALLOW);
      return;
    }
  }
}

/** A balanced tree of comparisons on the syscall number, so an allowed call costs ~log2(rules) jumps. */
function emitTree(asm: Assembler, rules: Array<{ nr: number; rule: SyscallRule }>): void {
  if (rules.length <= 3) {
    for (const { nr, rule } of rules) {
      const next = asm.newLabel();
      asm.jump(JMP_JEQ_K, nr, 0, next);
      emitRule(asm, rule);
      asm.mark(next);
    }
    asm.ret(RET_ALLOW);
    return;
  }
  const middle = Math.floor(rules.length / 2);
  const upper = asm.newLabel();
  const lower = asm.newLabel();
  // nr >= pivot: the upper half (an unconditional jump reaches past the lower half, however long).
  asm.jump(JMP_JGE_K, rules[middle]!.nr, 0, lower);
  asm.goto(upper);
  asm.mark(lower);
  emitTree(asm, rules.slice(0, middle));
  asm.mark(upper);
  emitTree(asm, rules.slice(middle));
}

/** The compiled filter for `arch` (a sock_filter array, as `bwrap --seccomp FD` reads it). */
export function buildSeccompProgram(arch: SeccompArch): Buffer {
  const asm = new Assembler();
  const rules = SECCOMP_POLICY.flatMap(({ name, rule }) => {
    const nr = syscallNumber(arch, name);
    return nr === undefined ? [] : [{ nr, rule }];
  }).sort((a, b) => a.nr - b.nr);
  for (let i = 1; i < rules.length; i += 1) if (rules[i]!.nr === rules[i - 1]!.nr) throw new Error(`seccomp policy: syscall ${rules[i]!.nr} listed twice`);

  const native = asm.newLabel();
  asm.load(ARCH);
  asm.jump(JMP_JEQ_K, AUDIT_ARCH[arch], native, 0);
  // Another ABI (i386 on x86_64, arm32 on aarch64): its syscall numbers are not described here.
  asm.ret(RET_KILL_PROCESS);
  asm.mark(native);
  asm.load(NR);
  if (arch === "x86_64") {
    const notX32 = asm.newLabel();
    asm.jump(JMP_JGE_K, X32_SYSCALL_BIT, 0, notX32);
    asm.ret(errnoOf("ENOSYS"));
    asm.mark(notX32);
  }
  emitTree(asm, rules);
  return asm.assemble();
}

// --- an interpreter of the programs above, for tests ------------------------------------------

export interface SeccompCall {
  arch?: number;
  nr: number;
  args?: Array<number | bigint>;
}

/** Runs `program` on one syscall: "allow", "kill", or the errno it returns. */
export function evaluateSeccomp(program: Buffer, call: SeccompCall): "allow" | "kill" | { errno: number } {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(call.nr >>> 0, NR);
  data.writeUInt32LE((call.arch ?? AUDIT_ARCH.x86_64) >>> 0, ARCH);
  (call.args ?? []).forEach((value, index) => data.writeBigUInt64LE(BigInt.asUintN(64, BigInt(value)), 16 + 8 * index));
  let a = 0;
  for (let pc = 0; pc < program.length / 8; ) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case LD_W_ABS:
        a = data.readUInt32LE(k);
        pc += 1;
        break;
      case JMP_JA:
        pc += 1 + k;
        break;
      case JMP_JEQ_K:
        pc += 1 + (a === k ? jt : jf);
        break;
      case JMP_JGT_K:
        pc += 1 + (a > k ? jt : jf);
        break;
      case JMP_JGE_K:
        pc += 1 + (a >= k ? jt : jf);
        break;
      case RET_K:
        if (k === RET_ALLOW) return "allow";
        if (k === RET_KILL_PROCESS) return "kill";
        if ((k & 0xffff0000) === RET_ERRNO) return { errno: k & 0xffff };
        throw new Error(`unexpected return ${k.toString(16)}`);
      default:
        throw new Error(`unexpected opcode ${code.toString(16)}`);
    }
  }
  throw new Error("program fell off its end");
}

export const AUDIT_ARCH_OF = AUDIT_ARCH;
