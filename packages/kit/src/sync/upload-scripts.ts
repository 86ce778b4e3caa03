import { randomBytes } from "node:crypto";
import { octal } from "./mapping.js";
import { enterPathLines, scriptPrologue } from "./remote-script.js";
import type { ConfinedSandboxPath } from "./sandbox-path.js";
import { shellQuote as quote } from "../exec/quote.js";

/**
 * Sandbox-side scripts for host → sandbox transfers. Every upload stages its bytes in a fresh 0700
 * directory `.paperclip-upload.<random>` created in the target's parent (same filesystem, so the
 * last step is a rename), under the name `payload`. Scripts are assembled from these pieces:
 *
 *   streaming file:  beginStage + removeStageOnExit + receivePayloadFromStdin + installFile
 *   streaming dir:   beginStage + removeStageOnExit + extractTree(stdin) + keepStage, then
 *                    reenterStage + removeStageOnExit + replaceWithTree
 *   base64:          beginStage + createEmptyPayload, one appendBase64ChunkFromStdin per chunk,
 *                    then reenterStage + removeStageOnExit + installFile, or + extractTree(payload)
 *                    + replaceWithTree
 */

export const UPLOAD_STAGE_PREFIX = ".paperclip-upload.";
export const SIZE_MARKER = "PAPERCLIP_SYNC_SIZE";

export function newStageName(): string {
  return `${UPLOAD_STAGE_PREFIX}${randomBytes(6).toString("hex")}`;
}

/**
 * Enter the target's parent (creating missing directories inside the roots) and make the stage.
 * With `removeOnExit` the removal trap is armed before the stage exists, so a signal that lands
 * right after `mkdir` cannot leave it behind.
 */
export function beginStage(target: ConfinedSandboxPath, roots: readonly string[], stage: string, kind: "file" | "directory", opts: { removeOnExit?: boolean } = {}): string {
  return (
    scriptPrologue(roots) +
    enterPathLines(target, { create: true, includeName: false, missingCode: "SYNC_REMOTE_FAILED" }) +
    `pc_name=${quote(target.name)}
${kind === "file" ? refuseDirectoryTarget : ""}pc_stage=${quote(`./${stage}`)}
${opts.removeOnExit ? removeStageOnExit : ""}mkdir -m 700 "$pc_stage" || pc_refuse SYNC_REMOTE_FAILED
`
  );
}

/** Enter the target's parent again (checked again: each call is a new shell) and find the stage. */
export function reenterStage(target: ConfinedSandboxPath, roots: readonly string[], stage: string): string {
  return (
    scriptPrologue(roots) +
    enterPathLines(target, { create: false, includeName: false, missingCode: "SYNC_REMOTE_FAILED" }) +
    `pc_name=${quote(target.name)}
pc_stage=${quote(`./${stage}`)}
if [ ! -d "$pc_stage" ] || [ -L "$pc_stage" ]; then pc_refuse SYNC_REMOTE_FAILED; fi
`
  );
}

const refuseDirectoryTarget = `if [ -d "./$pc_name" ] && [ ! -L "./$pc_name" ]; then pc_refuse SYNC_TARGET_INVALID; fi
`;

/** Remove the stage however the script ends (a TERM from an abort included). */
export const removeStageOnExit = `trap 'rm -rf "$pc_stage"' EXIT
trap 'exit 143' HUP INT TERM
`;

export const receivePayloadFromStdin = `cat > "$pc_stage/payload" || exit 1
`;

export const createEmptyPayload = `: > "$pc_stage/payload" || exit 1
`;

export const appendBase64ChunkFromStdin = `base64 -d >> "$pc_stage/payload" || exit 1
`;

/**
 * Size check, mode, then the atomic rename. The size check matters: if the host's read fails
 * midway, the runner may just close stdin, and a truncated file must not replace the target.
 */
export function installFile(mode: number, expectedSize: number): string {
  return `${refuseDirectoryTarget}pc_size=$(wc -c < "$pc_stage/payload") || exit 1
[ "$pc_size" -eq ${expectedSize} ] || { echo "received $pc_size of ${expectedSize} bytes" >&2; exit 1; }
chmod ${octal(mode)} "$pc_stage/payload" || exit 1
# mv onto a symlink to a directory would move *into* that directory: drop the link first.
if [ -L "./$pc_name" ]; then rm -f "./$pc_name" || exit 1; fi
mv -f "$pc_stage/payload" "./$pc_name" || exit 1
printf '${SIZE_MARKER} %s\\n' $pc_size
`;
}

/**
 * Extract an archive into `$pc_stage/tree`. `-p` keeps the archive's modes (GNU tar otherwise
 * applies the umask for non-root users); `-o` means "do not restore owners" on extraction in GNU
 * tar, busybox and bsdtar alike (the portable spelling of `--no-same-owner`). The stage is kept:
 * the host commits with `replaceWithTree` in a second script only once it knows it sent the whole
 * archive, because tar may accept a stream cut at a member boundary as complete.
 */
export function extractTree(source: "stdin" | "payload"): string {
  const archive = source === "stdin" ? "-" : "../payload";
  return `mkdir "$pc_stage/tree" || exit 1
(cd "$pc_stage/tree" && tar -x -p -o -f ${archive}) || exit 1
`;
}

/** Keep the stage after a successful script (it is removed by a trap otherwise). */
export const keepStage = `trap - EXIT HUP INT TERM
`;

/** Destroy-then-replace the target directory with the extracted tree. */
export function replaceWithTree(mode: number | undefined): string {
  return `[ -d "$pc_stage/tree" ] || pc_refuse SYNC_REMOTE_FAILED
${mode === undefined ? "" : `chmod ${octal(mode)} "$pc_stage/tree" || exit 1\n`}rm -rf "./$pc_name" || exit 1
mv "$pc_stage/tree" "./$pc_name" || exit 1
`;
}

/** Best-effort removal of a stage left by a failed chunked upload. */
export function removeStage(target: ConfinedSandboxPath, roots: readonly string[], stage: string): string {
  return (
    scriptPrologue(roots) +
    enterPathLines(target, { create: false, includeName: false, missingCode: "SYNC_REMOTE_FAILED" }) +
    `rm -rf ${quote(`./${stage}`)}
`
  );
}

/** The size the sandbox reported after `installFile`, if it printed one. */
export function reportedSize(stdout: string): number | undefined {
  const match = new RegExp(`${SIZE_MARKER} (\\d+)`).exec(stdout);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}
