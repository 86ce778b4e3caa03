import fs from "node:fs";
import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import type { TransferCounts } from "./host-pack.js";
import { ancestorsOf, normalizeMemberPath, resolveSymlinkMember } from "./member-path.js";
import { REGULAR, TarFormatError, TarParser, type TarMember } from "./tar-parse.js";

/** What the inspection learned, used to extract and to report counts. */
export interface ArchivePlan {
  counts: TransferCounts;
  /** Mode of the archive's root directory member ("./"), if it has one. */
  rootMode: number | undefined;
  /** For a file mapping: the single regular member. */
  fileMember: { path: string; mode: number | undefined } | undefined;
  /** Every kept member by normalized path (the last one when a path repeats), root excluded. */
  members: Map<string, PlannedMember>;
  /** Byte ranges `[start, end)` of excluded members, to be dropped before extraction. */
  excludedRanges: [number, number][];
}

export interface PlannedMember {
  type: string;
  /** Symlink target, as archived. */
  linkpath: string;
  mode: number;
}

/**
 * Read every member header of an outbound archive (a spooled file) and refuse the whole archive
 * before anything is extracted if any member could write or point outside the target:
 * - a path that is absolute or contains `..`;
 * - a symlink whose target is absolute or, resolved from the link's directory through the archive's
 *   own symlinks, leaves the root;
 * - a hardlink whose target is unsafe or is not an earlier regular member;
 * - any member below a symlink member (written "through" a symlink swapped in after validation),
 *   or a path that is a symlink in one member and something else in another;
 * - devices, FIFOs and every other non file/dir/link type;
 * - any structural problem `TarParser` refuses (bad checksum, unknown format, pax extensions it
 *   does not accept, truncation, data after the end-of-archive marker...).
 * Members excluded by the mapping are skipped here; their byte ranges are returned so that they
 * are dropped from the archive before it is extracted.
 * The archive is read once, streaming, with a bounded buffer.
 */
export async function inspectArchive(
  archiveFile: string,
  kind: "file" | "directory",
  matcher: ExcludeMatcher,
): Promise<ArchivePlan> {
  const inspector = createArchiveInspector(kind, matcher);
  const input = fs.createReadStream(archiveFile, { highWaterMark: 256 * 1024 });
  try {
    for await (const chunk of input) inspector.write(chunk as Buffer);
  } finally {
    input.destroy();
  }
  return inspector.finish();
}

/** Incremental form of `inspectArchive`: fed the archive bytes as they arrive (e.g. while spooling). */
export interface ArchiveInspector {
  write(chunk: Buffer): void;
  /** The input is complete: the plan, or SYNC_ARCHIVE_UNSAFE. */
  finish(): ArchivePlan;
}

export function createArchiveInspector(kind: "file" | "directory", matcher: ExcludeMatcher): ArchiveInspector {
  const problems: string[] = [];
  const seen = new Map<string, PlannedMember>();
  const excludedRanges: [number, number][] = [];
  const symlinks = new Map<string, string>();
  const counts: TransferCounts = { files: 0, bytes: 0 };
  let rootMode: number | undefined;
  let firstRegular: { path: string; mode: number | undefined } | undefined;
  let memberCount = 0;

  const refuse = (message: string): void => {
    if (problems.length < 20) problems.push(message);
  };

  const onEntry = (entry: TarMember): void => {
    const type = entry.type;
    memberCount += 1;
    const shownPath = JSON.stringify(String(entry.path).slice(0, 200));
    const memberPath = normalizeMemberPath(String(entry.path));
    if (memberPath === null) return refuse(`member ${shownPath} has an absolute or '..' path`);
    if (memberPath !== "" && matcher.excludes(memberPath)) {
      excludedRanges.push([entry.start, entry.end]);
      return;
    }

    if (memberPath === "") {
      if (type !== "Directory") return refuse(`member ${shownPath} (${type}) would replace the target root`);
      rootMode = entry.mode;
      return;
    }
    const previous = seen.get(memberPath);
    if (previous !== undefined && (previous.type === "SymbolicLink" || type === "SymbolicLink")) {
      return refuse(`member ${shownPath} appears twice, once as a symlink`);
    }

    if (REGULAR.has(type)) {
      counts.files += 1;
      counts.bytes += entry.size;
      firstRegular ??= { path: memberPath, mode: entry.mode };
    } else if (type === "Directory") {
      // fine: its children are checked on their own
    } else if (type === "SymbolicLink") {
      const target = entry.linkpath;
      if (target === "" || target.startsWith("/")) return refuse(`symlink ${shownPath} has an absolute or empty target`);
      symlinks.set(memberPath, target);
    } else if (type === "Link") {
      const target = normalizeMemberPath(entry.linkpath);
      if (target === null || target === "") return refuse(`hardlink ${shownPath} points outside the target`);
      const linked = seen.get(target);
      if (linked === undefined || !REGULAR.has(linked.type)) {
        return refuse(`hardlink ${shownPath} does not point at an earlier regular file of the archive`);
      }
    } else {
      return refuse(`member ${shownPath} has unsupported type ${type}`);
    }
    seen.set(memberPath, { type, linkpath: entry.linkpath, mode: entry.mode });
  };

  const parser = new TarParser(onEntry);
  let malformed: TarFormatError | undefined;
  const write = (chunk: Buffer): void => {
    if (malformed !== undefined) return;
    try {
      parser.write(chunk);
    } catch (error) {
      if (!(error instanceof TarFormatError)) throw error;
      malformed = error;
    }
  };
  const finish = (): ArchivePlan => {
    if (malformed === undefined) {
      try {
        parser.end();
      } catch (error) {
        if (!(error instanceof TarFormatError)) throw error;
        malformed = error;
      }
    }
    if (malformed !== undefined) {
      throw new SyncError("SYNC_ARCHIVE_UNSAFE", `the outbound archive is malformed (${malformed.message})`, { cause: malformed });
    }
    return checkWholeArchive();
  };
  return { write, finish };

  function checkWholeArchive(): ArchivePlan {
    // Checks that need every member: a symlink declared later still poisons earlier paths below it.
    for (const memberPath of seen.keys()) {
      const through = ancestorsOf(memberPath).find((ancestor) => symlinks.has(ancestor));
      if (through !== undefined) refuse(`member ${JSON.stringify(memberPath)} lies below symlink member ${JSON.stringify(through)}`);
    }
    for (const [linkPath, target] of symlinks) {
      const resolution = resolveSymlinkMember(linkPath, target, symlinks);
      if (resolution !== "inside") {
        refuse(`symlink ${JSON.stringify(linkPath)} ${resolution === "loop" ? "loops" : "points outside the target"}`);
      }
    }

    let fileMember: ArchivePlan["fileMember"];
    if (kind === "file") {
      if (memberCount !== 1 || firstRegular === undefined || firstRegular.path.includes("/")) {
        refuse("a file mapping's archive must hold exactly one regular file");
      } else {
        fileMember = firstRegular;
      }
    }

    if (problems.length > 0) {
      throw new SyncError("SYNC_ARCHIVE_UNSAFE", `refusing the outbound archive: ${problems.join("; ")}`);
    }
    return { counts, rootMode, fileMember, members: seen, excludedRanges };
  }
}
