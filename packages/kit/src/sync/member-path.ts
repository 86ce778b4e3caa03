/**
 * Normalization of tar member paths and link targets, shared by the inspection and the extraction
 * filter so both see the very same path. Returns `null` for anything that could leave the
 * extraction root lexically: absolute paths, `..` components, NUL.
 */
export function normalizeMemberPath(raw: string): string | null {
  if (raw.includes("\0") || raw.startsWith("/")) return null;
  const parts: string[] = [];
  for (const part of raw.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") return null;
    parts.push(part);
  }
  return parts.join("/");
}

/** Proper ancestors of a normalized member path, nearest last: "a/b/c" → ["a", "a/b"]. */
export function ancestorsOf(memberPath: string): string[] {
  const parts = memberPath.split("/");
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) out.push(parts.slice(0, i).join("/"));
  return out;
}

export type LinkResolution = "inside" | "escapes" | "loop";

const MAX_LINK_HOPS = 40;

/**
 * Resolve a symlink member's target the way the kernel would once the archive is extracted into an
 * empty directory: component by component, substituting symlink members as they are met and letting
 * `..` climb from the *physical* position. A purely lexical `normalize(dir + target)` is not enough:
 * with `s -> .` and `l -> s/..`, `l` normalizes to the root but really points at its parent.
 */
export function resolveSymlinkMember(linkMemberPath: string, linkTarget: string, symlinks: ReadonlyMap<string, string>): LinkResolution {
  if (linkTarget === "" || linkTarget.startsWith("/") || linkTarget.includes("\0")) return "escapes";
  const stack = linkMemberPath.split("/").slice(0, -1);
  let hops = 0;
  const walk = (target: string): LinkResolution => {
    for (const part of target.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") {
        if (stack.length === 0) return "escapes";
        stack.pop();
        continue;
      }
      stack.push(part);
      const next = symlinks.get(stack.join("/"));
      if (next === undefined) continue;
      if (++hops > MAX_LINK_HOPS) return "loop";
      if (next === "" || next.startsWith("/") || next.includes("\0")) return "escapes";
      stack.pop(); // a link's target is relative to the directory holding the link
      const result = walk(next);
      if (result !== "inside") return result;
    }
    return "inside";
  };
  return walk(linkTarget);
}
