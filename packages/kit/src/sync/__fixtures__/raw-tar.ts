/**
 * Hand-built tar archives for hostile-archive tests: node-tar's Pack refuses to produce most of
 * these, so headers are written byte by byte (ustar, with a correct checksum).
 */
import { STREAM_TRANSPORT } from "../../transport.js";
export interface RawMember {
  path: string;
  /** "0" file, "1" hardlink, "2" symlink, "3" char device, "4" block device, "5" dir, "6" fifo. */
  type: "0" | "1" | "2" | "3" | "4" | "5" | "6";
  linkpath?: string;
  mode?: number;
  body?: string | Buffer;
}

export function rawTar(members: RawMember[]): Buffer {
  const blocks: Buffer[] = [];
  for (const member of members) {
    const body = member.body === undefined ? Buffer.alloc(0) : Buffer.from(member.body);
    blocks.push(header(member, body.length));
    if (body.length > 0) {
      blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
    }
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

function header(member: RawMember, size: number): Buffer {
  const h = Buffer.alloc(512);
  const put = (offset: number, length: number, value: string) => h.write(value, offset, length, "utf8");
  const octal = (offset: number, length: number, value: number) => put(offset, length, value.toString(8).padStart(length - 1, "0") + "\0");
  if (Buffer.byteLength(member.path) > 100) throw new Error("rawTar: path too long for this helper");
  put(0, 100, member.path);
  octal(100, 8, member.mode ?? (member.type === "5" ? 0o755 : 0o644));
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 1_700_000_000);
  h.fill(" ", 148, 156); // checksum is computed with its own field as spaces
  put(156, 1, member.type);
  if (member.linkpath !== undefined) put(157, 100, member.linkpath);
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  let sum = 0;
  for (const byte of h) sum += byte;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

/** A runner that ignores the script and answers with the given bytes on stdout (exit 0). */
export function cannedArchiveRunner(archive: Buffer) {
  return {
    capabilities: STREAM_TRANSPORT,
    scripts: [] as string[],
    async run(script: string, io: import("../../transport.js").ScriptIo) {
      this.scripts.push(script);
      const out = io.stdout;
      if (typeof out === "function") out(archive);
      else if (out !== undefined) await new Promise<void>((done) => out.write(archive, () => done()));
      return { exitCode: 0, signal: null, reason: "exit" as const };
    },
  };
}
