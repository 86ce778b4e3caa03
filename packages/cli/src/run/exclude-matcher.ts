/**
 * `--exclude` globs, matched like the kit's sync excludes: a pattern matches a path relative to the
 * workspace root or its basename; excluding a directory excludes everything below it. `*` (no `/`),
 * `**` (anything), `?` (one character); a leading `/` anchors to the root.
 * TODO: use the kit's `compileExcludes` once @paperclip-sandbox/kit exports it, so both sides agree.
 */
export function compileExcludeFilter(patterns: readonly string[]): (relativePath: string) => boolean {
  const compiled = patterns
    .map((p) => p.trim())
    .filter(Boolean)
    .map((raw) => {
      let pattern = raw;
      while (pattern.startsWith("./")) pattern = pattern.slice(2);
      const anchored = pattern.startsWith("/");
      pattern = pattern.replace(/^\/+/, "").replace(/\/+$/, "");
      return { regex: new RegExp(`^${globToRegex(pattern)}$`, "s"), anchored };
    });
  const matchesItself = (relative: string) => {
    const base = relative.slice(relative.lastIndexOf("/") + 1);
    return compiled.some((p) => p.regex.test(relative) || (!p.anchored && p.regex.test(base)));
  };
  return (relative) => {
    if (compiled.length === 0) return false;
    const parts = relative.split("/");
    for (let i = 1; i <= parts.length; i++) if (matchesItself(parts.slice(0, i).join("/"))) return true;
    return false;
  };
}

function globToRegex(glob: string): string {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const atSegmentStart = i === 0 || glob[i - 1] === "/";
        i++;
        if (atSegmentStart && glob[i + 1] === "/") {
          i++;
          out += "(?:.*/)?";
        } else out += ".*";
      } else out += "[^/]*";
    } else if (c === "?") out += "[^/]";
    else out += c.replace(/[\\^$.|+()[\]{}]/g, "\\$&");
  }
  return out;
}
