import { SyncError } from "./errors.js";
import type { ExcludeMatcher } from "./exclude-glob.js";
import type { TransferCounts } from "./host-pack.js";
import { ancestorsOf, normalizeMemberPath, resolveSymlinkMember } from "./member-path.js";
import { REGULAR, TarFormatError, TarParser, type TarMember } from "./tar-parse.js";

/** What the inspection learned, used to extract and to report counts. */
export interface ArchivePlan {
  counts: TransferCounts;
  /** Mode of the archive's root directory member ("./"), if it has one (without setuid/setgid). */
  rootMode: number | undefined;
  /** For a file mapping: the single regular member. */
  fileMember: { path: string; mode: number | undefined } | undefined;
  /** Every member to land by normalized path (the last one when a path repeats), root excluded. */
  members: Map<string, PlannedMember>;
  /** Symlinks left out because their target is unsafe on the host, by path. */
  skippedLinks: SkippedLink[];
}

interface PlannedMember {
  type: string;
  /** Symlink target, as archived. */
  linkpath: string;
  /** Permission bits to land (setuid/setgid, and a file's sticky bit, already removed). */
  mode: number;
  /** As archived (seconds), for the symlinks the landing creates itself. */
  mtime: number | undefined;
}

interface SkippedLink {
  /** Normalized member path. */
  path: string;
  reason: "absolute target" | "empty target" | "points outside the target" | "loops";
}

/**
 * What the extractor gets of one member, decided as soon as its header is read: `extract` it (with
 * `fixMode` written into its header first, when its mode carried setuid/setgid or a file's sticky
 * bit), or `omit` it (excluded, refused, or a symlink: symlinks are judged only once every member is
 * known, so the landing creates the safe ones itself after extraction).
 */
export interface MemberVerdict {
  member: TarMember;
  action: "extract" | "omit";
  fixMode?: number;
}

export interface InspectOptions {
  /** Accept GNU tar's sparse members (only when the host's GNU tar extracts, so holes are kept). */
  gnuSparse: boolean;
}

/**
 * The permission bits a sandbox mode may keep on the host: never setuid/setgid (they would mean
 * something here, e.g. for a root worker), and the sticky bit on directories only.
 */
export function hostSafeMode(mode: number, directory: boolean): number {
  return mode & (directory ? 0o1777 : 0o777);
}

/**
 * Reads every member header of an outbound archive as its bytes arrive and plans its landing.
 * A symlink whose target is absolute, empty, or (resolved from the link's directory through the
 * archive's own symlinks) leaves the root or loops is *skipped*: an ordinary tree has those (a
 * virtualenv's `bin/python -> /usr/bin/python3`), so the link is left out, named in the plan, and
 * everything else lands. The whole archive is refused (none of it lands, and a refused member is
 * never extracted) if any member could write outside the target or is something an ordinary
 * `tar -c` does not produce:
 * - a path that is absolute or contains `..`;
 * - a hardlink whose target is unsafe or is not an earlier regular member;
 * - any member below a symlink member (written "through" a symlink swapped in after validation),
 *   or a path that is a symlink in one member and something else in another;
 * - devices, FIFOs and every other non file/dir/link type;
 * - any structural problem `TarParser` refuses (bad checksum, unknown format, pax extensions it
 *   does not accept, truncation, data after the end-of-archive marker...).
 * Each member's verdict goes to `onVerdict` the moment its header is read (see `MemberVerdict`), so
 * the archive can be extracted while it arrives; whatever is refused is never extracted, and a
 * refusal (`refused`) means the landing throws the extraction away.
 */
export interface ArchiveInspector {
  write(chunk: Buffer): void;
  /** Something was refused already (or the bytes are malformed): the plan will be SYNC_ARCHIVE_UNSAFE. */
  readonly refused: boolean;
  /** The end-of-archive marker was read (what follows may only be zeros). */
  readonly ended: boolean;
  /** The input is complete: the plan, or SYNC_ARCHIVE_UNSAFE. */
  finish(): ArchivePlan;
}

export function createArchiveInspector(kind: "file" | "directory", matcher: ExcludeMatcher, options: InspectOptions, onVerdict: (verdict: MemberVerdict) => void = () => {}): ArchiveInspector {
  const problems: string[] = [];
  const seen = new Map<string, PlannedMember>();
  const symlinks = new Map<string, string>();
  const counts: TransferCounts = { files: 0, bytes: 0 };
  let rootMode: number | undefined;
  let firstRegular: { path: string; mode: number | undefined } | undefined;
  let memberCount = 0;

  let refusals = 0;
  const refuse = (message: string): false => {
    refusals += 1;
    if (problems.length < 20) problems.push(message);
    return false;
  };

  const onEntry = (entry: TarMember): void => {
    const fixMode = judge(entry);
    if (fixMode === false) onVerdict({ member: entry, action: "omit" });
    else onVerdict({ member: entry, action: "extract", ...(fixMode === undefined ? {} : { fixMode }) });
  };

  /** `false` when the member must not be extracted; otherwise the mode fix its header needs, if any. */
  const judge = (entry: TarMember): number | undefined | false => {
    const type = entry.type;
    memberCount += 1;
    const shownPath = JSON.stringify(String(entry.path).slice(0, 200));
    const memberPath = normalizeMemberPath(String(entry.path));
    if (memberPath === null) return refuse(`member ${shownPath} has an absolute or '..' path`);
    if (memberPath !== "" && matcher.excludes(memberPath)) return false;
    const directory = type === "Directory";
    const mode = hostSafeMode(entry.mode, directory);
    const fixMode = mode !== entry.mode && (directory || REGULAR.has(type)) ? mode : undefined;

    if (memberPath === "") {
      if (!directory) return refuse(`member ${shownPath} (${type}) would replace the target root`);
      rootMode = mode;
      return fixMode;
    }
    const previous = seen.get(memberPath);
    if (previous !== undefined && (previous.type === "SymbolicLink" || type === "SymbolicLink")) {
      return refuse(`member ${shownPath} appears twice, once as a symlink`);
    }

    if (REGULAR.has(type)) {
      counts.files += 1;
      counts.bytes += entry.size;
      firstRegular ??= { path: memberPath, mode };
    } else if (directory) {
      // fine: its children are checked on their own
    } else if (type === "SymbolicLink") {
      // judged once every member is known: a later link may change where this one leads
      symlinks.set(memberPath, entry.linkpath);
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
    seen.set(memberPath, { type, linkpath: entry.linkpath, mode, mtime: entry.mtime });
    return type === "SymbolicLink" ? false : fixMode;
  };

  const parser = new TarParser(onEntry, { gnuSparse: options.gnuSparse });
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
  return {
    write,
    finish,
    get refused() {
      return refusals > 0 || malformed !== undefined;
    },
    get ended() {
      return parser.ended;
    },
  };

  function checkWholeArchive(): ArchivePlan {
    // Checks that need every member: a symlink declared later still poisons earlier paths below it,
    // and a member below any symlink, safe or not, would be written "through" it (never ordinary).
    for (const memberPath of seen.keys()) {
      const through = ancestorsOf(memberPath).find((ancestor) => symlinks.has(ancestor));
      if (through !== undefined) refuse(`member ${JSON.stringify(memberPath)} lies below symlink member ${JSON.stringify(through)}`);
    }
    const skippedLinks: SkippedLink[] = [];
    for (const [linkPath, target] of symlinks) {
      const reason = unsafeLinkReason(linkPath, target, symlinks);
      if (reason === undefined) continue;
      skippedLinks.push({ path: linkPath, reason });
      seen.delete(linkPath);
    }
    skippedLinks.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));

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
    return { counts, rootMode, fileMember, members: seen, skippedLinks };
  }
}

/** Why a symlink member must not be created on the host, or undefined when it stays inside. */
function unsafeLinkReason(linkPath: string, target: string, symlinks: ReadonlyMap<string, string>): SkippedLink["reason"] | undefined {
  if (target === "") return "empty target";
  if (target.startsWith("/")) return "absolute target";
  const resolution = resolveSymlinkMember(linkPath, target, symlinks);
  if (resolution === "escapes") return "points outside the target";
  if (resolution === "loop") return "loops";
  return undefined;
}
