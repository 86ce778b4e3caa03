/**
 * Path patterns: `/sandboxes/:id/files`, `/toolbox/:id/*rest` (the rest, slashes included),
 * `/process.Process/Start` (literal). Parameters are percent-decoded; literals match exactly.
 */
export interface PathPattern {
  readonly source: string;
  match(path: string): Record<string, string> | undefined;
}

type Segment = { literal: string } | { param: string } | { rest: string };

export function compilePattern(source: string): PathPattern {
  if (!source.startsWith("/")) throw new TypeError(`route pattern: must start with '/' (got ${JSON.stringify(source)})`);
  const segments: Segment[] = source
    .slice(1)
    .split("/")
    .map((part, index, all): Segment => {
      if (part.startsWith(":")) {
        const param = part.slice(1);
        if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(param)) throw new TypeError(`route pattern ${source}: bad parameter name ${JSON.stringify(part)}`);
        return { param };
      }
      if (part.startsWith("*")) {
        if (index !== all.length - 1) throw new TypeError(`route pattern ${source}: '*' is only allowed as the last segment`);
        return { rest: part.slice(1) || "rest" };
      }
      return { literal: part };
    });

  return {
    source,
    match(path) {
      const parts = path.slice(1).split("/");
      const params: Record<string, string> = {};
      for (let index = 0; index < segments.length; index++) {
        const segment = segments[index]!;
        if ("rest" in segment) {
          params[segment.rest] = parts.slice(index).map(decodeSegment).join("/");
          return params;
        }
        const part = parts[index];
        if (part === undefined) return undefined;
        if ("literal" in segment) {
          if (part !== segment.literal) return undefined;
        } else {
          if (part === "") return undefined;
          params[segment.param] = decodeSegment(part);
        }
      }
      return parts.length === segments.length ? params : undefined;
    },
  };
}

function decodeSegment(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part; // malformed escapes stay as sent; the handler sees what the client wrote
  }
}
