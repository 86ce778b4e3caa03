/**
 * A strict, streaming tar header reader: bytes go in chunk by chunk (nothing is buffered but one
 * header block and small metadata bodies), members come out with their byte range. Used to inspect
 * outbound archives before the system tar extracts them, and to count what an inbound archive
 * carries. It is deliberately narrower than any tar implementation, and where it accepts something
 * it reads it the way GNU tar does (prefix only with the POSIX magic, `L`/`K` long names, pax
 * `path`/`linkpath`/`size`), so the member list it reports is what GNU tar will extract. Refused:
 * bad checksums, unknown magic, malformed numbers or pax records, global pax headers, GNU sparse
 * and volume extensions, metadata headers without a member, duplicate metadata, links or
 * directories carrying data, a lone zero block, non-zero bytes after the end-of-archive marker,
 * and a stream that ends anywhere but after that marker.
 */

export interface TarMember {
  /** node-tar's names: File, OldFile, ContiguousFile, Link, SymbolicLink, Directory, ... */
  type: string;
  path: string;
  linkpath: string;
  /** Body bytes (after a pax `size`). */
  size: number;
  /** Permission bits from the header (0o7777). */
  mode: number;
  /** Offset of the member's first block (its metadata headers included). */
  start: number;
  /** Offset just past its padded body. */
  end: number;
}

export class TarFormatError extends Error {
  readonly code = "TAR_BAD_ARCHIVE";
  constructor(message: string) {
    super(message);
    this.name = "TarFormatError";
  }
}

const BLOCK = 512;
const MAX_META_BYTES = 1024 * 1024;

const TYPES: Readonly<Record<string, string>> = {
  "0": "File",
  "\0": "OldFile",
  "7": "ContiguousFile",
  "1": "Link",
  "2": "SymbolicLink",
  "3": "CharacterDevice",
  "4": "BlockDevice",
  "5": "Directory",
  "6": "FIFO",
};
/** The member types that carry a regular file's bytes. */
export const REGULAR: ReadonlySet<string> = new Set(["File", "OldFile", "ContiguousFile"]);
const NO_DATA = new Set(["Link", "SymbolicLink", "Directory"]);

interface Pending {
  start?: number;
  longPath?: string;
  longLink?: string;
  pax?: Map<string, string>;
}

interface MetaBody {
  flag: string;
  size: number;
  /** Bytes still to read, padding included. */
  remaining: number;
  chunks: Buffer[];
  held: number;
}

const padded = (size: number): number => Math.ceil(size / BLOCK) * BLOCK;

export class TarParser {
  readonly #onMember: (member: TarMember) => void;
  readonly #header = Buffer.alloc(BLOCK);
  #headerFill = 0;
  #offset = 0;
  #skip = 0;
  #meta: MetaBody | undefined;
  #pending: Pending = {};
  #zeroBlocks = 0;
  #ended = false;
  #failure: TarFormatError | undefined;

  constructor(onMember: (member: TarMember) => void) {
    this.#onMember = onMember;
  }

  /** Throws a TarFormatError on the first structural problem (and on every call after it). */
  write(chunk: Buffer): void {
    if (this.#failure !== undefined) throw this.#failure;
    try {
      this.#consume(chunk);
    } catch (error) {
      this.#failure = error instanceof TarFormatError ? error : new TarFormatError(String(error));
      throw this.#failure;
    }
  }

  /** The input is complete: throws unless it ended cleanly after the end-of-archive marker. */
  end(): void {
    if (this.#failure !== undefined) throw this.#failure;
    if (!this.#ended) {
      this.#failure = new TarFormatError(`the archive is truncated (no end-of-archive marker after ${this.#offset} bytes)`);
      throw this.#failure;
    }
  }

  #consume(chunk: Buffer): void {
    let p = 0;
    const length = chunk.length;
    while (p < length) {
      if (this.#ended) {
        const from = p;
        for (; p < length; p++) {
          if (chunk[p] !== 0) throw new TarFormatError(`data after the end-of-archive marker at byte ${this.#offset + (p - from)}`);
        }
        this.#offset += length - from;
        break;
      }
      if (this.#skip > 0) {
        const n = Math.min(this.#skip, length - p);
        this.#skip -= n;
        this.#offset += n;
        p += n;
        continue;
      }
      const meta = this.#meta;
      if (meta !== undefined) {
        const n = Math.min(meta.remaining, length - p);
        const wanted = Math.min(n, meta.size - meta.held);
        if (wanted > 0) {
          meta.chunks.push(Buffer.from(chunk.subarray(p, p + wanted)));
          meta.held += wanted;
        }
        meta.remaining -= n;
        this.#offset += n;
        p += n;
        if (meta.remaining === 0) this.#finishMeta(meta);
        continue;
      }
      const n = Math.min(BLOCK - this.#headerFill, length - p);
      chunk.copy(this.#header, this.#headerFill, p, p + n);
      this.#headerFill += n;
      this.#offset += n;
      p += n;
      if (this.#headerFill === BLOCK) {
        this.#headerFill = 0;
        this.#onHeader(this.#offset - BLOCK);
      }
    }
  }

  #onHeader(at: number): void {
    const h = this.#header;
    if (isZeroBlock(h)) {
      if (this.#pending.start !== undefined) throw new TarFormatError(`a metadata header at byte ${this.#pending.start} has no member`);
      this.#zeroBlocks += 1;
      if (this.#zeroBlocks === 2) this.#ended = true;
      return;
    }
    if (this.#zeroBlocks > 0) throw new TarFormatError(`a lone zero block before byte ${at}`);
    checkChecksum(h, at);
    const posix = h.toString("latin1", 257, 263) === "ustar\0";
    const gnu = h.toString("latin1", 257, 265) === "ustar  \0";
    if (!posix && !gnu) throw new TarFormatError(`the header at byte ${at} has an unknown format`);
    const flag = String.fromCharCode(h[156] ?? 0);
    const size = parseNumber(h, 124, 12, "size", at);

    if (flag === "x" || flag === "L" || flag === "K" || flag === "g") {
      if (flag === "g") throw new TarFormatError(`global pax header at byte ${at} is not accepted`);
      if (size > MAX_META_BYTES) throw new TarFormatError(`metadata header at byte ${at} is too large`);
      this.#pending.start ??= at;
      const meta: MetaBody = { flag, size, remaining: padded(size), chunks: [], held: 0 };
      if (meta.remaining === 0) this.#finishMeta(meta);
      else this.#meta = meta;
      return;
    }

    const pending = this.#pending;
    this.#pending = {};
    let path = cString(h, 0, 100);
    if (posix && h[345] !== 0) path = `${cString(h, 345, 155)}/${path}`;
    let linkpath = cString(h, 157, 100);
    let bodySize = size;
    if (pending.longPath !== undefined) path = pending.longPath;
    if (pending.longLink !== undefined) linkpath = pending.longLink;
    const pax = pending.pax;
    if (pax !== undefined) {
      const paxPath = pax.get("path");
      const paxLink = pax.get("linkpath");
      const paxSize = pax.get("size");
      if ((paxPath !== undefined && pending.longPath !== undefined) || (paxLink !== undefined && pending.longLink !== undefined)) {
        throw new TarFormatError(`the member at byte ${at} has both a GNU long name and a pax name`);
      }
      if (paxPath !== undefined) path = paxPath;
      if (paxLink !== undefined) linkpath = paxLink;
      if (paxSize !== undefined) bodySize = Number(paxSize);
    }
    const type = TYPES[flag] ?? `Unsupported(${JSON.stringify(flag)})`;
    if (NO_DATA.has(type) && bodySize !== 0) throw new TarFormatError(`the ${type} member at byte ${at} carries data`);
    // GNU tar extracts a "regular" member whose name ends in "/" as a directory: refuse the ambiguity.
    if (REGULAR.has(type) && path.endsWith("/")) throw new TarFormatError(`the regular member at byte ${at} has a directory name`);
    const mode = parseNumber(h, 100, 8, "mode", at) & 0o7777;
    const member: TarMember = {
      type,
      path,
      linkpath,
      size: bodySize,
      mode,
      start: pending.start ?? at,
      end: at + BLOCK + padded(bodySize),
    };
    this.#skip = padded(bodySize);
    this.#onMember(member);
  }

  #finishMeta(meta: MetaBody): void {
    this.#meta = undefined;
    const body = Buffer.concat(meta.chunks, meta.held);
    const pending = this.#pending;
    if (meta.flag === "L") {
      if (pending.longPath !== undefined) throw new TarFormatError("two GNU long names for one member");
      pending.longPath = cString(body, 0, body.length);
    } else if (meta.flag === "K") {
      if (pending.longLink !== undefined) throw new TarFormatError("two GNU long link names for one member");
      pending.longLink = cString(body, 0, body.length);
    } else {
      if (pending.pax !== undefined) throw new TarFormatError("two pax headers for one member");
      pending.pax = parsePax(body);
    }
  }
}

function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

function checkChecksum(h: Buffer, at: number): void {
  const stored = parseNumber(h, 148, 8, "checksum", at);
  let sum = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) if (i < 148 || i >= 156) sum += h[i] as number;
  if (sum !== stored) throw new TarFormatError(`bad header checksum at byte ${at}`);
}

/** Octal (leading spaces, then digits, then NUL or space) or positive base-256, as GNU tar reads them. */
function parseNumber(h: Buffer, offset: number, length: number, what: string, at: number): number {
  const end = offset + length;
  if (h[offset] === 0x80) {
    let value = 0;
    for (let i = offset + 1; i < end; i++) value = value * 256 + (h[i] as number);
    if (!Number.isSafeInteger(value)) throw new TarFormatError(`${what} at byte ${at} is out of range`);
    return value;
  }
  let i = offset;
  while (i < end && h[i] === 0x20) i++;
  let value = 0;
  let digits = 0;
  while (i < end && (h[i] as number) >= 0x30 && (h[i] as number) <= 0x37) {
    value = value * 8 + ((h[i] as number) - 0x30);
    digits++;
    i++;
  }
  if (digits === 0 || (i < end && h[i] !== 0 && h[i] !== 0x20) || !Number.isSafeInteger(value)) {
    throw new TarFormatError(`malformed ${what} field at byte ${at}`);
  }
  return value;
}

function cString(buf: Buffer, offset: number, length: number): string {
  const end = offset + length;
  let stop = buf.indexOf(0, offset);
  if (stop === -1 || stop > end) stop = end;
  return buf.toString("utf8", offset, stop);
}

/** `"<len> <key>=<value>\n"` records; malformed, duplicate or GNU-extension keys are refused. */
function parsePax(body: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let i = 0;
  while (i < body.length) {
    let j = i;
    while (j < body.length && (body[j] as number) >= 0x30 && (body[j] as number) <= 0x39) j++;
    if (j === i || body[j] !== 0x20) throw new TarFormatError("malformed pax record");
    const length = Number(body.toString("latin1", i, j));
    if (!Number.isSafeInteger(length) || length <= j - i + 1 || i + length > body.length) throw new TarFormatError("malformed pax record length");
    const record = body.subarray(j + 1, i + length);
    if (record[record.length - 1] !== 0x0a) throw new TarFormatError("malformed pax record");
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw new TarFormatError("malformed pax record");
    const key = record.toString("utf8", 0, eq);
    const value = record.toString("utf8", eq + 1, record.length - 1);
    if (records.has(key)) throw new TarFormatError(`duplicate pax key ${JSON.stringify(key.slice(0, 40))}`);
    if (key.startsWith("GNU.")) throw new TarFormatError(`pax key ${JSON.stringify(key.slice(0, 40))} (GNU sparse/volume extension) is not accepted`);
    if (key === "size" && !/^[0-9]{1,15}$/.test(value)) throw new TarFormatError("malformed pax size");
    records.set(key, value);
    i += length;
  }
  return records;
}
