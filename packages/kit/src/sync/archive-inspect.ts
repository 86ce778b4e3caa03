import { list as listTar } from "tar";
import type { ReadEntry } from "tar";
import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import type { TransferCounts } from "./host-pack.js";
import { ancestorsOf, normalizeMemberPath, resolveSymlinkMember } from "./member-path.js";

/** What the inspection learned, used to extract and to report counts. */
export interface ArchivePlan {
  counts: TransferCounts;
  /** Mode of the archive's root directory member ("./"), if it has one. */
  rootMode: number | undefined;
  /** For a file mapping: the single regular member. */
  fileMember: { path: string; mode: number | undefined } | undefined;
}

const REGULAR = new Set(["File", "OldFile", "ContiguousFile"]);
// Parsed for their effect on the next header; node-tar does not normally emit them as entries.
const METADATA = new Set([
  "ExtendedHeader",
  "GlobalExtendedHeader",
  "OldExtendedHeader",
  "NextFileHasLongPath",
  "NextFileHasLongLinkpath",
  "OldGnuLongPath",
]);

interface SeenMember {
  type: string;
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
 * - any header node-tar itself warns about (bad checksum, truncation...).
 * Members excluded by the mapping are skipped here and by the extraction filter alike.
 */
export async function inspectArchive(
  archiveFile: string,
  kind: "file" | "directory",
  matcher: ExcludeMatcher,
): Promise<ArchivePlan> {
  const problems: string[] = [];
  const seen = new Map<string, SeenMember>();
  const symlinks = new Map<string, string>();
  const counts: TransferCounts = { files: 0, bytes: 0 };
  let rootMode: number | undefined;
  const regularMembers: { path: string; mode: number | undefined }[] = [];
  let memberCount = 0;

  const refuse = (message: string): void => {
    if (problems.length < 20) problems.push(message);
  };

  const onEntry = (entry: ReadEntry): void => {
    const type = String(entry.type);
    if (METADATA.has(type)) return;
    memberCount += 1;
    const shownPath = JSON.stringify(String(entry.path).slice(0, 200));
    const memberPath = normalizeMemberPath(String(entry.path));
    if (memberPath === null) return refuse(`member ${shownPath} has an absolute or '..' path`);
    if (memberPath !== "" && matcher.excludes(memberPath)) return;

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
      regularMembers.push({ path: memberPath, mode: entry.mode });
    } else if (type === "Directory") {
      // fine: its children are checked on their own
    } else if (type === "SymbolicLink") {
      const target = entry.linkpath === undefined ? "" : String(entry.linkpath);
      if (target === "" || target.startsWith("/")) return refuse(`symlink ${shownPath} has an absolute or empty target`);
      symlinks.set(memberPath, target);
    } else if (type === "Link") {
      const target = normalizeMemberPath(entry.linkpath === undefined ? "" : String(entry.linkpath));
      if (target === null || target === "") return refuse(`hardlink ${shownPath} points outside the target`);
      const linked = seen.get(target);
      if (linked === undefined || !REGULAR.has(linked.type)) {
        return refuse(`hardlink ${shownPath} does not point at an earlier regular file of the archive`);
      }
    } else {
      return refuse(`member ${shownPath} has unsupported type ${type}`);
    }
    seen.set(memberPath, { type });
  };

  try {
    await listTar({
      file: archiveFile,
      strict: true, // any warning (bad checksum, truncation, unknown format) rejects
      onReadEntry: onEntry,
    });
  } catch (error) {
    throw new SyncError("SYNC_ARCHIVE_UNSAFE", `the outbound archive is malformed (${tarErrorCode(error)})`, {
      cause: error,
    });
  }

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
    const only = regularMembers[0];
    if (memberCount !== 1 || only === undefined || only.path.includes("/")) {
      refuse("a file mapping's archive must hold exactly one regular file");
    } else {
      fileMember = only;
    }
  }

  if (problems.length > 0) {
    throw new SyncError("SYNC_ARCHIVE_UNSAFE", `refusing the outbound archive: ${problems.join("; ")}`);
  }
  return { counts, rootMode, fileMember };
}

function tarErrorCode(error: unknown): string {
  const code = (error as { code?: unknown; tarCode?: unknown } | null)?.tarCode ?? (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "unreadable";
}
