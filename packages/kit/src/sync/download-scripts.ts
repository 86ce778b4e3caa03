import { sandboxSafeExcludes } from "./exclude-glob.js";
import { enterPathLines, scriptPrologue } from "./remote-script.js";
import type { ConfinedSandboxPath } from "./sandbox-path.js";
import { shellQuote as quote } from "../exec/quote.js";
import { SIZE_MARKER } from "./upload-scripts.js";

/**
 * Sandbox-side scripts for sandbox → host transfers: `tar -c` of the source, either to stdout
 * (streaming) or into a stage file the host then reads in chunks (base64 fallback). Whatever comes
 * back is inspected on the host before extraction, so these scripts only need to confine what
 * they read, not to be trusted.
 */

const STAGE_MARKER = "PAPERCLIP_SYNC_STAGE";

export interface PackSourceOptions {
  kind: "file" | "directory";
  followSymlinks: boolean;
  exclude: string[] | undefined;
  /** The host can land GNU tar's sparse members: let a GNU tar in the sandbox pack holes as holes. */
  sparse: boolean;
}

/**
 * Filesystems whose allocated-block counts GNU tar's `--sparse` can trust. GNU tar archives a file
 * that reports no allocated blocks as all hole (without reading it), which would turn data into
 * zeros on a filesystem that reports none for files it does hold (some FUSE and network ones).
 */
const SPARSE_SAFE_FILESYSTEMS = ["ext2/ext3", "xfs", "btrfs", "tmpfs", "zfs", "overlayfs", "f2fs"];

/**
 * Lines that leave the shell ready to archive the source and set `pc_member` to what to archive:
 * - directory: `cd -P` into the source itself (checked), member `.`;
 * - file: `cd -P` into its parent (checked), then follow a symlinked file hop by hop, re-checking
 *   the directory after each hop, so the file read is inside the roots; member `./<name>`.
 */
function locateSource(source: ConfinedSandboxPath, roots: readonly string[], kind: "file" | "directory"): string {
  if (kind === "directory") {
    return scriptPrologue(roots) + enterPathLines(source, { create: false, includeName: true, missingCode: "SYNC_SOURCE_INVALID" }) + "pc_member=.\n";
  }
  return (
    scriptPrologue(roots) +
    enterPathLines(source, { create: false, includeName: false, missingCode: "SYNC_SOURCE_INVALID" }) +
    `pc_name=${quote(source.name)}
pc_hops=0
while [ -L "./$pc_name" ]; do
  pc_hops=$((pc_hops + 1))
  [ "$pc_hops" -le 40 ] || pc_refuse SYNC_SOURCE_INVALID
  pc_link=$(readlink "./$pc_name") || pc_refuse SYNC_SOURCE_INVALID
  case "$pc_link" in
    */*)
      pc_dir=\${pc_link%/*}
      pc_name=\${pc_link##*/}
      case "$pc_dir" in /*) ;; '') pc_dir=/ ;; *) pc_dir="./$pc_dir" ;; esac
      pc_enter "$pc_dir" SYNC_SOURCE_INVALID
      ;;
    *) pc_name=$pc_link ;;
  esac
done
case "$pc_name" in ''|.|..) pc_refuse SYNC_SOURCE_INVALID ;; esac
[ -f "./$pc_name" ] || pc_refuse SYNC_SOURCE_INVALID
pc_member="./$pc_name"
`
  );
}

/**
 * Lines that set `pc_sparse` to GNU tar's sparse flags when the host asked for them, the sandbox's
 * tar is GNU tar and the source is on a filesystem listed above; empty otherwise (any other tar
 * archives holes as zeros, as before). `--format=gnu` pins the one sparse form the host accepts.
 */
function sparseFlagLines(options: PackSourceOptions): string {
  if (!options.sparse) return "";
  return `pc_sparse=
case "$(tar --version 2>/dev/null)" in
  "tar (GNU tar) "*)
    case "$(stat -f -c %T "$pc_member" 2>/dev/null)" in
      ${SPARSE_SAFE_FILESYSTEMS.map(quote).join("|")}) pc_sparse="--format=gnu --sparse" ;;
    esac ;;
esac
`;
}

function tarCreateCommand(options: PackSourceOptions): string {
  const flags = ["-c", "-f", "-"];
  if (options.sparse) flags.push("$pc_sparse"); // unquoted: no flags, or two words
  if (options.kind === "directory") {
    if (options.followSymlinks) flags.push("-h");
    for (const pattern of sandboxSafeExcludes(options.exclude)) flags.push(quote(`--exclude=${pattern}`));
  }
  return `tar ${flags.join(" ")} "$pc_member"`;
}

/** Streaming: the archive goes to stdout. */
export function packToStdoutScript(source: ConfinedSandboxPath, roots: readonly string[], options: PackSourceOptions): string {
  return locateSource(source, roots, options.kind) + sparseFlagLines(options) + `${tarCreateCommand(options)} || exit 1\n`;
}

/**
 * Base64 fallback, step 1: write the archive into a fresh 0700 stage under the sandbox's temp
 * directory (not under a root: archiving a root would otherwise include its own stage), then print
 * the stage path and the archive size.
 */
export function packToStageScript(source: ConfinedSandboxPath, roots: readonly string[], options: PackSourceOptions, stageName: string): string {
  return (
    locateSource(source, roots, options.kind) +
    sparseFlagLines(options) +
    `pc_stage="\${TMPDIR:-/tmp}"/${quote(stageName)}
mkdir -m 700 "$pc_stage" || exit 1
${tarCreateCommand(options)} > "$pc_stage/archive.tar" || { rm -rf "$pc_stage"; exit 1; }
pc_size=$(wc -c < "$pc_stage/archive.tar") || { rm -rf "$pc_stage"; exit 1; }
printf '${STAGE_MARKER} %s\\n' "$pc_stage"
printf '${SIZE_MARKER} %s\\n' $pc_size
`
  );
}

/** Base64 fallback, step 2: one chunk of the staged archive, base64-encoded, on stdout. */
export function readStageChunkScript(stagePath: string, chunkBytes: number, index: number): string {
  return `dd if=${quote(`${stagePath}/archive.tar`)} bs=${chunkBytes} skip=${index} count=1 2>/dev/null | base64\n`;
}

/** Base64 fallback, step 3 (always): remove the stage. */
export function removeStageScript(stagePath: string): string {
  return `rm -rf ${quote(stagePath)}\n`;
}

/** The stage path and archive size printed by `packToStageScript`, if both are there and sane. */
export function parseStageReport(stdout: string, stageName: string): { stagePath: string; size: number } | undefined {
  const stage = new RegExp(`^${STAGE_MARKER} (/[^\\n]*)$`, "m").exec(stdout)?.[1];
  const size = new RegExp(`^${SIZE_MARKER} (\\d+)$`, "m").exec(stdout)?.[1];
  if (stage === undefined || size === undefined || !stage.endsWith(`/${stageName}`)) return undefined;
  return { stagePath: stage, size: Number(size) };
}
