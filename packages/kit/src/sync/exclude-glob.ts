/**
 * `exclude` globs of a directory mapping. A pattern matches a member when it matches the member's
 * path relative to the mapping root, or its basename; excluding a directory excludes everything
 * below it. Syntax: `*` (any run of characters except `/`), `**` (anything, `/` included; a `**`
 * segment followed by a slash also matches zero directories), `?` (one character except `/`);
 * everything else is literal.
 * A leading `/` anchors the pattern to the mapping root (no basename match); a trailing `/` is
 * ignored. Written in-house because the kit needs exactly this and nothing more.
 */
export interface ExcludeMatcher {
  /** True when `relativePath` (POSIX, no leading `./`) or one of its ancestors is excluded. */
  excludes(relativePath: string): boolean;
  /** True when `relativePath` itself matches (ancestors not considered). */
  matchesItself(relativePath: string): boolean;
}

interface CompiledPattern {
  regex: RegExp;
  anchored: boolean;
}

export function compileExcludes(patterns: readonly string[] | undefined): ExcludeMatcher {
  const compiled = (patterns ?? []).filter((p) => typeof p === "string" && p.trim() !== "").map(compilePattern);
  const matchesItself = (relativePath: string): boolean => {
    if (compiled.length === 0 || relativePath === "" || relativePath === ".") return false;
    const slash = relativePath.lastIndexOf("/");
    const base = slash === -1 ? relativePath : relativePath.slice(slash + 1);
    return compiled.some((p) => p.regex.test(relativePath) || (!p.anchored && p.regex.test(base)));
  };
  return {
    matchesItself,
    excludes(relativePath) {
      if (compiled.length === 0) return false;
      const parts = relativePath.split("/");
      for (let i = 1; i <= parts.length; i++) {
        if (matchesItself(parts.slice(0, i).join("/"))) return true;
      }
      return false;
    },
  };
}

function compilePattern(raw: string): CompiledPattern {
  let pattern = raw.trim();
  while (pattern.startsWith("./")) pattern = pattern.slice(2);
  const anchored = pattern.startsWith("/");
  pattern = pattern.replace(/^\/+/, "").replace(/\/+$/, "");
  return { regex: new RegExp(`^${globToRegexSource(pattern)}$`, "s"), anchored };
}

function globToRegexSource(glob: string): string {
  let out = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        const atSegmentStart = i === 0 || glob[i - 1] === "/";
        i++;
        if (atSegmentStart && glob[i + 1] === "/") {
          i++;
          out += "(?:.*/)?"; // "**/" : zero or more whole directories
        } else {
          out += ".*";
        }
      } else {
        out += "[^/]*";
      }
    } else if (c === "?") {
      out += "[^/]";
    } else {
      out += c.replace(/[\\^$.|+()[\]{}]/g, "\\$&");
    }
  }
  return out;
}

/**
 * Patterns the sandbox's tar can apply itself with `--exclude`, because GNU tar, busybox and bsdtar
 * then exclude exactly what we would: a literal with no `/`, `?`, `[` or `\`, optionally with one
 * `*` at the start and/or the end. (Their `*` and `?` also match `/`, so anything richer could drop
 * more than the host filter would.) The host filter stays authoritative; this only saves bandwidth.
 */
export function sandboxSafeExcludes(patterns: readonly string[] | undefined): string[] {
  return (patterns ?? []).filter(
    (p) =>
      typeof p === "string" &&
      /^\*?[^*?/\\[\]\n\r\0-][^*?/\\[\]\n\r\0]*\*?$/.test(p) &&
      // tar names the root member "." (or "./"): a pattern matching it would drop the whole tree
      !matchesLikeTar(p, ".") &&
      !matchesLikeTar(p, "./"),
  );
}

function matchesLikeTar(pattern: string, name: string): boolean {
  const source = pattern
    .split("*")
    .map((part) => part.replace(/[\\^$.|+()[\]{}?]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${source}$`, "s").test(name);
}
