/**
 * The jail prelude: a tiny static program the keeper runs right before bwrap, written by the
 * backend into the state directory. It
 *   1. for a root worker, becomes the jail's host user: no supplementary groups, then gid and uid
 *      (real, effective and saved), or exits 126 if any of that fails;
 *   2. joins a fresh anonymous session keyring (KEYCTL_JOIN_SESSION_KEYRING), so the jail does not
 *      inherit the worker's (its keys are readable by whoever possesses it);
 *   3. closes every descriptor from 10 up (close_range, or one by one on kernels before 5.9): the
 *      keeper hands bwrap exactly fds 0-9, so nothing the worker inherited reaches the jail;
 *   4. execs its arguments (bwrap ...), or exits 127.
 * A few dozen instructions per architecture, assembled here (listing beside each instruction) into
 * a minimal ELF executable: no compiler, no library, no dynamic loader (and, unlike setpriv, no
 * dynamic linking on the cold path).
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import type { HostUser } from "./host-user.js";
import type { SeccompArch } from "./seccomp.js";

/** Descriptors the jail gets from the keeper: 0-9 (process.ts); the prelude closes the rest. */
const PRELUDE_FIRST_CLOSED_FD = 10;

export type Piece = number[] | { label: string } | { branch: (offset: number) => number[]; to: string; size: number };

export function assemble(pieces: Piece[]): Buffer {
  const labels = new Map<string, number>();
  let at = 0;
  for (const piece of pieces) {
    if (Array.isArray(piece)) at += piece.length;
    else if ("label" in piece) labels.set(piece.label, at);
    else at += piece.size;
  }
  const out: number[] = [];
  for (const piece of pieces) {
    if (Array.isArray(piece)) out.push(...piece);
    else if ("branch" in piece) {
      const target = labels.get(piece.to);
      if (target === undefined) throw new Error(`prelude: unknown label ${piece.to}`);
      const bytes = piece.branch(target - out.length);
      if (bytes.length !== piece.size) throw new Error("prelude: branch size mismatch");
      out.push(...bytes);
    }
  }
  return Buffer.from(out);
}

export const u32 = (value: number) => [value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, (value >>> 24) & 0xff];

function x86_64(dropTo: HostUser | null): Buffer {
  const rel8 = (opcode: number) => (offset: number) => {
    const displacement = offset - 2; // from the end of the 2-byte instruction
    if (displacement < -128 || displacement > 127) throw new Error("prelude: rel8 out of range");
    return [opcode, displacement & 0xff];
  };
  const jnzFail: Piece = { branch: (offset) => [0x0f, 0x85, ...u32((offset - 6) >>> 0)], to: "fail", size: 6 }; // jnz fail (rel32)
  const drop: Piece[] = dropTo
    ? [
        [0xb8, ...u32(116)], //        mov eax, 116          ; setgroups(0, NULL)
        [0x31, 0xff], //               xor edi, edi
        [0x31, 0xf6], //               xor esi, esi
        [0x0f, 0x05], //               syscall
        [0x85, 0xc0], //               test eax, eax
        jnzFail,
        [0xb8, ...u32(119)], //        mov eax, 119          ; setresgid(gid, gid, gid)
        [0xbf, ...u32(dropTo.gid)], // mov edi, gid
        [0xbe, ...u32(dropTo.gid)], // mov esi, gid
        [0xba, ...u32(dropTo.gid)], // mov edx, gid
        [0x0f, 0x05], //               syscall
        [0x85, 0xc0], //               test eax, eax
        jnzFail,
        [0xb8, ...u32(117)], //        mov eax, 117          ; setresuid(uid, uid, uid)
        [0xbf, ...u32(dropTo.uid)], // mov edi, uid
        [0xbe, ...u32(dropTo.uid)], // mov esi, uid
        [0xba, ...u32(dropTo.uid)], // mov edx, uid
        [0x0f, 0x05], //               syscall
        [0x85, 0xc0], //               test eax, eax
        jnzFail,
      ]
    : [];
  return assemble([
    ...drop,
    [0xb8, ...u32(250)], //            mov eax, 250          ; keyctl
    [0xbf, ...u32(1)], //              mov edi, 1            ; KEYCTL_JOIN_SESSION_KEYRING
    [0x31, 0xf6], //                   xor esi, esi          ; name NULL: anonymous
    [0x0f, 0x05], //                   syscall               ; (errors ignored: a kernel without keys)
    [0xb8, ...u32(436)], //            mov eax, 436          ; close_range
    [0xbf, ...u32(PRELUDE_FIRST_CLOSED_FD)], // mov edi, 10
    [0xbe, ...u32(0xffffffff)], //     mov esi, ~0
    [0x31, 0xd2], //                   xor edx, edx          ; flags 0
    [0x0f, 0x05], //                   syscall
    [0x85, 0xc0], //                   test eax, eax
    { branch: rel8(0x74), to: "exec", size: 2 }, //         jz exec
    [0xbb, ...u32(PRELUDE_FIRST_CLOSED_FD)], // mov ebx, 10  ; no close_range: one by one
    { label: "loop" },
    [0xb8, ...u32(3)], //              mov eax, 3            ; close
    [0x89, 0xdf], //                   mov edi, ebx
    [0x0f, 0x05], //                   syscall
    [0xff, 0xc3], //                   inc ebx
    [0x81, 0xfb, ...u32(65536)], //    cmp ebx, 65536
    { branch: rel8(0x72), to: "loop", size: 2 }, //         jb loop
    { label: "exec" },
    [0x48, 0x8b, 0x04, 0x24], //       mov rax, [rsp]        ; argc
    [0x48, 0x8d, 0x74, 0x24, 0x10], // lea rsi, [rsp+16]     ; &argv[1]
    [0x48, 0x8b, 0x7c, 0x24, 0x10], // mov rdi, [rsp+16]     ; argv[1]
    [0x48, 0x8d, 0x54, 0xc4, 0x10], // lea rdx, [rsp+rax*8+16] ; envp
    [0xb8, ...u32(59)], //             mov eax, 59           ; execve
    [0x0f, 0x05], //                   syscall
    [0xbf, ...u32(127)], //            mov edi, 127
    [0xb8, ...u32(231)], //            mov eax, 231          ; exit_group
    [0x0f, 0x05], //                   syscall
    { label: "fail" },
    [0xbf, ...u32(126)], //            mov edi, 126          ; the privilege drop failed
    [0xb8, ...u32(231)], //            mov eax, 231          ; exit_group
    [0x0f, 0x05], //                   syscall
  ]);
}

function aarch64(dropTo: HostUser | null): Buffer {
  const word = (value: number) => u32(value >>> 0);
  const movz = (rd: number, imm: number, shift = 0) => word(0xd2800000 | ((shift / 16) << 21) | (imm << 5) | rd);
  const svc = word(0xd4000001);
  const imm19 = (offset: number) => {
    if (offset % 4 !== 0 || offset < -(1 << 20) || offset >= 1 << 20) throw new Error("prelude: branch out of range");
    return ((offset / 4) & 0x7ffff) << 5;
  };
  const cbnzFail: Piece = { branch: (offset) => word(0xb5000000 | imm19(offset) | 0), to: "fail", size: 4 }; // cbnz x0, fail
  // w0 = value; w1 = w0; w2 = w0
  const threeOf = (value: number): Piece[] => [
    word(0x52800000 | ((value & 0xffff) << 5)), //          movz w0, #lo16
    word(0x72a00000 | (((value >>> 16) & 0xffff) << 5)), // movk w0, #hi16, lsl #16
    word(0x2a0003e1), //                                   mov w1, w0
    word(0x2a0003e2), //                                   mov w2, w0
  ];
  const drop: Piece[] = dropTo
    ? [
        movz(8, 159), //                   mov x8, #159        ; setgroups(0, NULL)
        movz(0, 0), //                     mov x0, #0
        movz(1, 0), //                     mov x1, #0
        svc, //                            svc #0
        cbnzFail,
        movz(8, 149), //                   mov x8, #149        ; setresgid(gid, gid, gid)
        ...threeOf(dropTo.gid),
        svc,
        cbnzFail,
        movz(8, 147), //                   mov x8, #147        ; setresuid(uid, uid, uid)
        ...threeOf(dropTo.uid),
        svc,
        cbnzFail,
      ]
    : [];
  return assemble([
    ...drop,
    movz(8, 219), //                       mov x8, #219        ; keyctl
    movz(0, 1), //                         mov x0, #1          ; KEYCTL_JOIN_SESSION_KEYRING
    movz(1, 0), //                         mov x1, #0          ; anonymous
    svc, //                                svc #0
    movz(8, 436), //                       mov x8, #436        ; close_range
    movz(0, PRELUDE_FIRST_CLOSED_FD), //   mov x0, #10
    word(0x12800001), //                   mov w1, #0xffffffff (movn w1, #0)
    movz(2, 0), //                         mov x2, #0
    svc, //                                svc #0
    { branch: (offset) => word(0xb4000000 | imm19(offset) | 0), to: "exec", size: 4 }, // cbz x0, exec
    movz(19, PRELUDE_FIRST_CLOSED_FD), //  mov x19, #10        ; one by one
    movz(20, 1, 16), //                    mov x20, #0x10000
    { label: "loop" },
    movz(8, 57), //                        mov x8, #57         ; close
    word(0xaa1303e0), //                   mov x0, x19
    svc, //                                svc #0
    word(0x91000673), //                   add x19, x19, #1
    word(0xeb14027f), //                   cmp x19, x20
    { branch: (offset) => word(0x54000000 | imm19(offset) | 0x3), to: "loop", size: 4 }, // b.lo loop
    { label: "exec" },
    word(0xf94003e9), //                   ldr x9, [sp]        ; argc
    word(0xf9400be0), //                   ldr x0, [sp, #16]   ; argv[1]
    word(0x910043e1), //                   add x1, sp, #16     ; &argv[1]
    word(0x8b296fe2), //                   add x2, sp, x9, uxtx #3
    word(0x91004042), //                   add x2, x2, #16     ; envp
    movz(8, 221), //                       mov x8, #221        ; execve
    svc, //                                svc #0
    movz(0, 127), //                       mov x0, #127
    movz(8, 94), //                        mov x8, #94         ; exit_group
    svc, //                                svc #0
    { label: "fail" },
    movz(0, 126), //                       mov x0, #126        ; the privilege drop failed
    movz(8, 94), //                        mov x8, #94         ; exit_group
    svc, //                                svc #0
  ]);
}

const MACHINE: Record<SeccompArch, number> = { x86_64: 62, aarch64: 183 };
const BASE = 0x400000;

/**
 * The prelude as a static ELF64 executable for `arch`: one read+execute segment, entry after the
 * headers. `dropTo`: the host user it becomes first (a root worker's jails).
 */
export function buildPrelude(arch: SeccompArch, dropTo: HostUser | null = null): Buffer {
  return staticElf(arch, arch === "x86_64" ? x86_64(dropTo) : aarch64(dropTo));
}

/** `code` as a minimal static ELF64 executable for `arch`: one read+execute segment, entry after the headers. */
export function staticElf(arch: SeccompArch, code: Buffer): Buffer {
  const headers = 64 + 56;
  const total = headers + code.length;
  const elf = Buffer.alloc(total);
  elf.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0], 0); // ELFCLASS64, little-endian, version 1, SysV
  elf.writeUInt16LE(2, 16); // ET_EXEC
  elf.writeUInt16LE(MACHINE[arch], 18);
  elf.writeUInt32LE(1, 20);
  elf.writeBigUInt64LE(BigInt(BASE + headers), 24); // e_entry
  elf.writeBigUInt64LE(64n, 32); // e_phoff
  elf.writeUInt16LE(64, 52); // e_ehsize
  elf.writeUInt16LE(56, 54); // e_phentsize
  elf.writeUInt16LE(1, 56); // e_phnum
  elf.writeUInt16LE(64, 58); // e_shentsize (no sections)
  // PT_LOAD, PF_R | PF_X, the whole file at BASE.
  elf.writeUInt32LE(1, 64);
  elf.writeUInt32LE(5, 68);
  elf.writeBigUInt64LE(0n, 72);
  elf.writeBigUInt64LE(BigInt(BASE), 80);
  elf.writeBigUInt64LE(BigInt(BASE), 88);
  elf.writeBigUInt64LE(BigInt(total), 96);
  elf.writeBigUInt64LE(BigInt(total), 104);
  elf.writeBigUInt64LE(0x10000n, 112);
  code.copy(elf, headers);
  return elf;
}

/**
 * Writes the prelude for `arch` (and `dropTo`) under `<stateDir>/bin/` (named by its content, 0555,
 * renamed into place) and returns its path.
 */
export async function installPrelude(stateDir: string, arch: SeccompArch, dropTo: HostUser | null = null): Promise<string> {
  const program = buildPrelude(arch, dropTo);
  const dir = path.join(stateDir, "bin");
  const file = path.join(dir, `jail-prelude-${createHash("sha256").update(program).digest("hex").slice(0, 12)}`);
  if (fs.existsSync(file)) return file;
  await fsp.mkdir(dir, { recursive: true, mode: 0o755 });
  await fsp.chmod(dir, 0o755);
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, program, { mode: 0o555 });
  await fsp.chmod(temp, 0o555);
  await fsp.rename(temp, file);
  return file;
}
