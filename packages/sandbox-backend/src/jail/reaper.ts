/**
 * The command reaper: a tiny static program every command of a jail is started through. It marks
 * itself a child subreaper (PR_SET_CHILD_SUBREAPER) and execs the command, so the command's own
 * process (same pid) is the subreaper of everything it starts: a process that leaves the command's
 * session or group (`setsid`, a double fork) and loses its parent is re-parented to the command, not
 * to the jail's init. While the command lives, every process it started is therefore below it in the
 * process tree, and a timeout (or kill) can find and end them all (supervisor/in-jail/process-group.mts),
 * whatever session or group they moved to. The attribute survives execve and is not inherited.
 *
 * Usage: `reaper PATH ARGV0 ARGS...` (execve(PATH, [ARGV0, ARGS...]): the command keeps the argv[0]
 * it would have had). Bound into the jail from a pipe (`--ro-bind-data`), execute and read only (0555).
 */
import { assemble, staticElf, u32, type Piece } from "./prelude.js";
import type { SeccompArch } from "./seccomp.js";

/** PR_SET_CHILD_SUBREAPER. */
const SET_CHILD_SUBREAPER = 36;

function x86_64(): Buffer {
  const pieces: Piece[] = [
    [0xb8, ...u32(157)], //             mov eax, 157          ; prctl
    [0xbf, ...u32(SET_CHILD_SUBREAPER)], // mov edi, 36       ; PR_SET_CHILD_SUBREAPER
    [0xbe, ...u32(1)], //               mov esi, 1
    [0x0f, 0x05], //                    syscall               ; (a kernel without it: the command runs all the same)
    [0x48, 0x8b, 0x04, 0x24], //        mov rax, [rsp]        ; argc
    [0x48, 0x8d, 0x74, 0x24, 0x18], //  lea rsi, [rsp+24]     ; &argv[2]
    [0x48, 0x8b, 0x7c, 0x24, 0x10], //  mov rdi, [rsp+16]     ; argv[1]
    [0x48, 0x8d, 0x54, 0xc4, 0x10], //  lea rdx, [rsp+rax*8+16] ; envp
    [0xb8, ...u32(59)], //              mov eax, 59           ; execve
    [0x0f, 0x05], //                    syscall
    [0xbf, ...u32(127)], //             mov edi, 127
    [0xb8, ...u32(231)], //             mov eax, 231          ; exit_group
    [0x0f, 0x05], //                    syscall
  ];
  return assemble(pieces);
}

function aarch64(): Buffer {
  const word = (value: number) => u32(value >>> 0);
  const movz = (rd: number, imm: number) => word(0xd2800000 | (imm << 5) | rd);
  const svc = word(0xd4000001);
  return assemble([
    movz(8, 167), //                    mov x8, #167          ; prctl
    movz(0, SET_CHILD_SUBREAPER), //    mov x0, #36
    movz(1, 1), //                      mov x1, #1
    svc, //                             svc #0
    word(0xf94003e9), //                ldr x9, [sp]          ; argc
    word(0xf9400be0), //                ldr x0, [sp, #16]     ; argv[1]
    word(0x910063e1), //                add x1, sp, #24       ; &argv[2]
    word(0x8b296fe2), //                add x2, sp, x9, uxtx #3
    word(0x91004042), //                add x2, x2, #16       ; envp
    movz(8, 221), //                    mov x8, #221          ; execve
    svc, //                             svc #0
    movz(0, 127), //                    mov x0, #127
    movz(8, 94), //                     mov x8, #94           ; exit_group
    svc, //                             svc #0
  ]);
}

/** The reaper as a static ELF64 executable for `arch`. */
export function buildReaper(arch: SeccompArch): Buffer {
  return staticElf(arch, arch === "x86_64" ? x86_64() : aarch64());
}
