/**
 * A strict, streaming tar header reader: bytes go in chunk by chunk (nothing is buffered but one
 * header block and small metadata bodies), members come out with their byte range. Used to inspect
 * outbound archives before the system tar extracts them, and to count what an inbound archive
 * carries. It is deliberately narrower than any tar implementation, and where it accepts something
 * it reads it the way GNU tar does (prefix only with the POSIX magic, `L`/`K` long names, pax
 * `path`/`linkpath`/`size`), so the member list it reports is what GNU tar will extract. Refused:
 * bad checksums, unknown magic, malformed numbers or pax records, global pax headers, pax GNU sparse
 * keys and volume extensions, metadata headers without a member, duplicate metadata, links or
 * directories carrying data, a lone zero block, non-zero bytes after the end-of-archive marker,
 * and a stream that ends anywhere but after that marker.
 *
 * Sparse files: only with `gnuSparse`, and only the one form GNU tar writes with `--format=gnu
 * --sparse` (type `S`, the old GNU sparse map: four entries in the header, 21 in each extension
 * block that follows while `isextended` is set). The map must be exactly what GNU tar produces:
 * entries in ascending, non-overlapping order inside the real size, a zero-length entry only as
 * the last one and only at the real size, the map ending at the real size, its data adding up to
 * the header's size, `isextended` only after a full block (GNU tar stops reading the map at the
 * first empty entry: an extension block after one would be read as a header there), unused
 * entries and the rest of an extension block all zero, no pax header and no POSIX magic.
 */

export interface TarMember {
  /** node-tar's names: File, OldFile, ContiguousFile, Link, SymbolicLink, Directory, ... */
  type: string;
  path: string;
  linkpath: string;
  /** Body bytes in the archive (after a pax `size`; a sparse file's data without its holes). */
  size: number;
  /** The file's apparent size: `size`, except for a sparse file. */
  realSize: number;
  /** Permission bits from the header (0o7777). */
  mode: number;
  /** Modification time in whole seconds (a pax `mtime`, else the header's); undefined if unreadable. */
  mtime: number | undefined;
  /** Offset of the member's first block (its metadata headers included). */
  start: number;
  /** Offset of the member's own header block (after its metadata headers). */
  headerAt: number;
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
export const REGULAR: ReadonlySet<string> = new Set(["File", "OldFile", "ContiguousFile", "GNUSparseFile"]);
const NO_DATA = new Set(["Link", "SymbolicLink", "Directory"]);

export interface TarParserOptions {
  /** Accept GNU tar's own sparse members (type `S`, old GNU sparse map) as regular files. */
  gnuSparse?: boolean;
}

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

/** A sparse member whose map continues in extension blocks, emitted once its map is complete. */
interface SparseInProgress {
  member: TarMember;
  map: SparseMap;
  extensionBlocks: number;
}

/** Running checks over one sparse map's entries. */
interface SparseMap {
  realSize: number;
  /** End of the last entry. */
  end: number;
  data: number;
  entries: number;
  /** A zero-length entry was seen: nothing may follow it. */
  closed: boolean;
}

const SPARSE_ENTRY = 24;
const SPARSE_IN_HEADER = 4;
const SPARSE_IN_EXTENSION = 21;

const padded = (size: number): number => Math.ceil(size / BLOCK) * BLOCK;

export class TarParser {
  readonly #onMember: (member: TarMember) => void;
  readonly #gnuSparse: boolean;
  readonly #header = Buffer.alloc(BLOCK);
  #headerFill = 0;
  #offset = 0;
  #skip = 0;
  #meta: MetaBody | undefined;
  #pending: Pending = {};
  #sparse: SparseInProgress | undefined;
  #zeroBlocks = 0;
  #ended = false;
  #failure: TarFormatError | undefined;

  /** The end-of-archive marker has been read (only zero bytes may follow). */
  get ended(): boolean {
    return this.#ended;
  }

  constructor(onMember: (member: TarMember) => void, options: TarParserOptions = {}) {
    this.#onMember = onMember;
    this.#gnuSparse = options.gnuSparse === true;
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
    if (this.#sparse !== undefined) return this.#onSparseExtension(this.#sparse, h, at);
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
    const sparse = flag === "S" && this.#gnuSparse;
    if (sparse && (!gnu || pax !== undefined)) throw new TarFormatError(`the sparse member at byte ${at} is not in GNU tar's form`);
    const type = sparse ? "GNUSparseFile" : (TYPES[flag] ?? `Unsupported(${JSON.stringify(flag)})`);
    if (NO_DATA.has(type) && bodySize !== 0) throw new TarFormatError(`the ${type} member at byte ${at} carries data`);
    // GNU tar extracts a "regular" member whose name ends in "/" as a directory: refuse the ambiguity.
    if (REGULAR.has(type) && path.endsWith("/")) throw new TarFormatError(`the regular member at byte ${at} has a directory name`);
    const mode = parseNumber(h, 100, 8, "mode", at) & 0o7777;
    const mtime = memberMtime(h, pax?.get("mtime"), at);
    const member: TarMember = {
      type,
      path,
      linkpath,
      size: bodySize,
      realSize: bodySize,
      mode,
      mtime,
      start: pending.start ?? at,
      headerAt: at,
      end: at + BLOCK + padded(bodySize),
    };
    if (sparse) {
      member.realSize = parseNumber(h, 483, 12, "sparse real size", at);
      const map: SparseMap = { realSize: member.realSize, end: 0, data: 0, entries: 0, closed: false };
      const full = readSparseEntries(h, 386, SPARSE_IN_HEADER, map, at);
      if (extendedFlag(h[482], full, at)) {
        this.#sparse = { member, map, extensionBlocks: 0 };
        return;
      }
      this.#finishSparse(member, map, 0, at);
      return;
    }
    this.#emit(member);
  }

  #emit(member: TarMember): void {
    this.#skip = padded(member.size);
    this.#onMember(member);
  }

  #onSparseExtension(sparse: SparseInProgress, block: Buffer, at: number): void {
    sparse.extensionBlocks += 1;
    // GNU tar writes an extension block only for entries that did not fit before it.
    if (block[12] === 0) throw new TarFormatError(`the sparse extension block at byte ${at} is empty`);
    const full = readSparseEntries(block, 0, SPARSE_IN_EXTENSION, sparse.map, at);
    for (let i = SPARSE_IN_EXTENSION * SPARSE_ENTRY + 1; i < BLOCK; i++) {
      if (block[i] !== 0) throw new TarFormatError(`the sparse extension block at byte ${at} has stray bytes`);
    }
    if (extendedFlag(block[SPARSE_IN_EXTENSION * SPARSE_ENTRY], full, at)) return;
    this.#sparse = undefined;
    this.#finishSparse(sparse.member, sparse.map, sparse.extensionBlocks, sparse.member.headerAt);
  }

  #finishSparse(member: TarMember, map: SparseMap, extensionBlocks: number, at: number): void {
    if (map.entries === 0) throw new TarFormatError(`the sparse member at byte ${at} has an empty map`);
    if (map.end !== map.realSize) throw new TarFormatError(`the sparse map of the member at byte ${at} does not end at its real size`);
    if (map.data !== member.size) throw new TarFormatError(`the sparse map of the member at byte ${at} does not add up to its size`);
    member.end = member.headerAt + BLOCK * (1 + extensionBlocks) + padded(member.size);
    this.#emit(member);
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

/**
 * Read up to `count` sparse entries (12-byte offset, 12-byte length) from `block` at `offset` into
 * `map`, checking each; returns true when every slot held an entry (only then may the map go on).
 * GNU tar ends a map at the first entry whose length field starts with NUL; here such an entry and
 * every slot after it must be all zero.
 */
function readSparseEntries(block: Buffer, offset: number, count: number, map: SparseMap, at: number): boolean {
  for (let i = 0; i < count; i++) {
    const e = offset + i * SPARSE_ENTRY;
    if (block[e + 12] === 0) {
      for (let j = e; j < offset + count * SPARSE_ENTRY; j++) {
        if (block[j] !== 0) throw new TarFormatError(`malformed sparse map entry at byte ${at}`);
      }
      return false;
    }
    const start = parseNumber(block, e, 12, "sparse offset", at);
    const length = parseNumber(block, e + 12, 12, "sparse length", at);
    if (map.closed) throw new TarFormatError(`a sparse map entry after the map's end at byte ${at}`);
    if (start < map.end || start + length > map.realSize || !Number.isSafeInteger(start + length)) {
      throw new TarFormatError(`a sparse map entry out of order or out of range at byte ${at}`);
    }
    if (length === 0) {
      if (start !== map.realSize) throw new TarFormatError(`an empty sparse map entry before the real size at byte ${at}`);
      map.closed = true;
    }
    map.end = start + length;
    map.data += length;
    map.entries += 1;
  }
  return true;
}

/** The `isextended` byte: 0 or 1, and 1 only after a full set of entries. */
function extendedFlag(byte: number | undefined, full: boolean, at: number): boolean {
  if (byte !== 0 && byte !== 1) throw new TarFormatError(`malformed sparse extension flag at byte ${at}`);
  if (byte === 1 && !full) throw new TarFormatError(`a sparse map extended after an empty entry at byte ${at}`);
  return byte === 1;
}

function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

function checkChecksum(h: Buffer, at: number): void {
  if (headerChecksum(h) !== parseNumber(h, 148, 8, "checksum", at)) throw new TarFormatError(`bad header checksum at byte ${at}`);
}

/** Every header byte summed, the checksum field counted as spaces. */
function headerChecksum(h: Buffer): number {
  let sum = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) if (i < 148 || i >= 156) sum += h[i] as number;
  return sum;
}

/**
 * Replace a header block's mode field with `mode` (octal, as GNU tar writes it) and recompute its
 * checksum, in place. The block must be a valid header (its checksum is checked first).
 */
export function rewriteHeaderMode(header: Buffer, mode: number, at: number): void {
  if (header.length !== BLOCK) throw new TarFormatError(`the header at byte ${at} is not one block`);
  checkChecksum(header, at);
  header.write(`${(mode & 0o7777).toString(8).padStart(7, "0")}\0`, 100, 8, "latin1");
  header.write(`${headerChecksum(header).toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
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

/** Only informative (a symlink's time is set from it), so an odd value is left out rather than refused. */
function memberMtime(h: Buffer, paxMtime: string | undefined, at: number): number | undefined {
  if (paxMtime !== undefined) return /^[0-9]{1,15}(\.[0-9]*)?$/.test(paxMtime) ? Math.floor(Number(paxMtime)) : undefined;
  try {
    return parseNumber(h, 136, 12, "mtime", at);
  } catch {
    return undefined;
  }
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
