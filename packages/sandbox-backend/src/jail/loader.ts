/**
 * Finding the ELF loader ("program interpreter", e.g. /lib64/ld-linux-x86-64.so.2) of the node
 * binary the supervisor runs, in the tree the jail sees. bwrap copies it into the jail as an
 * execute-only file and the supervisor is started as `<loader> <node> supervisor.mjs`: the kernel
 * decides dumpability from the file it execs, and an unreadable one makes the process
 * non-dumpable, which is what keeps commands of the same uid out of the supervisor (no ptrace, no
 * /proc/2/mem, no pidfd_getfd). The loader then maps node, which stays readable for commands.
 */
import fs from "node:fs";
import path from "node:path";

const PT_INTERP = 3;
const MAX_LINKS = 40;

/** The PT_INTERP path of a 64-bit little-endian ELF file; null for a static binary or not ELF64 LE. */
export function elfInterpreter(file: string): string | null {
  const fd = fs.openSync(file, "r");
  try {
    const header = Buffer.alloc(64);
    if (fs.readSync(fd, header, 0, 64, 0) < 64) return null;
    if (header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1) return null;
    const phoff = Number(header.readBigUInt64LE(0x20));
    const phentsize = header.readUInt16LE(0x36);
    const phnum = header.readUInt16LE(0x38);
    if (phentsize < 56 || phnum > 256) return null;
    const table = Buffer.alloc(phentsize * phnum);
    fs.readSync(fd, table, 0, table.length, phoff);
    for (let i = 0; i < phnum; i += 1) {
      const entry = table.subarray(i * phentsize);
      if (entry.readUInt32LE(0) !== PT_INTERP) continue;
      const offset = Number(entry.readBigUInt64LE(8));
      const size = Number(entry.readBigUInt64LE(32));
      if (size < 2 || size > 4096) return null;
      const name = Buffer.alloc(size);
      fs.readSync(fd, name, 0, size, offset);
      const text = name.toString("utf8").replace(/\0+$/, "");
      return text.startsWith("/") ? text : null;
    }
    return null;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The host path of `jailPath` as a process rooted at `treeRoot` sees it: symlinks are followed with
 * absolute targets taken relative to `treeRoot` (a rootfs's /lib64 -> /usr/lib64 stays inside it).
 */
export function resolveInTree(treeRoot: string, jailPath: string): string | null {
  if (treeRoot === "/") {
    try {
      return fs.realpathSync(jailPath);
    } catch {
      return null;
    }
  }
  let pending = jailPath.split("/").filter(Boolean);
  let resolved: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === ".") continue;
    if (part === "..") {
      resolved.pop();
      continue;
    }
    const host = path.join(treeRoot, ...resolved, part);
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(host);
    } catch {
      return null;
    }
    if (!stat.isSymbolicLink()) {
      resolved.push(part);
      continue;
    }
    links += 1;
    if (links > MAX_LINKS) return null;
    const target = fs.readlinkSync(host);
    if (target.startsWith("/")) resolved = [];
    pending = [...target.split("/").filter(Boolean), ...pending];
  }
  return path.join(treeRoot, ...resolved);
}

/** The host path of the loader for `hostNodeBinary` in the jail's tree; null when node is static or the loader is missing. */
export function supervisorLoader(hostNodeBinary: string, treeRoot: string): string | null {
  let interpreter: string | null;
  try {
    interpreter = elfInterpreter(hostNodeBinary);
  } catch {
    return null;
  }
  if (!interpreter) return null;
  const host = resolveInTree(treeRoot, interpreter);
  if (!host) return null;
  try {
    return fs.statSync(host).isFile() ? host : null;
  } catch {
    return null;
  }
}
