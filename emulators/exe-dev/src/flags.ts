/** A command's flags, in the shape of Go's `flag` package (exe.dev's commands are Go FlagSets). */
type FlagKind = "bool" | "string" | "uint" | "repeat";
export type FlagSpec = Record<string, FlagKind>;
export type FlagValues = Record<string, string | boolean | number | string[] | undefined>;

export class FlagError extends Error {}

/**
 * Parses a command's arguments as exe.dev does: flags and positional arguments may interleave (flags
 * are moved first, a flag without `=` that is not a bool taking the next word as its value when it
 * does not start with `-`), then Go's `flag.Parse` rules (`-x`/`--x`, `-x=v`, `-x v`, `--` ends flags).
 */
export function parseFlags(args: readonly string[], spec: FlagSpec): { flags: FlagValues; positional: string[] } {
  const flagArgs: string[] = [];
  const posArgs: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      posArgs.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("-") && !arg.startsWith("-----")) {
      flagArgs.push(arg);
      // A bool flag takes no value word (`cp --json src dst` copies src to dst, as exe.dev's tests say).
      const isBool = spec[arg.replace(/^--?/, "")] === "bool";
      if (!arg.includes("=") && !isBool && i + 1 < args.length && !args[i + 1]!.startsWith("-")) flagArgs.push(args[++i]!);
      continue;
    }
    posArgs.push(arg);
  }
  const combined = [...flagArgs, ...(posArgs.some((p) => p.startsWith("-")) ? ["--"] : []), ...posArgs];

  const flags: FlagValues = {};
  let i = 0;
  for (; i < combined.length; i++) {
    const arg = combined[i]!;
    if (arg === "--") {
      i += 1;
      break;
    }
    if (arg.length < 2 || !arg.startsWith("-")) break;
    const body = arg.startsWith("--") ? arg.slice(2) : arg.slice(1);
    if (body === "" || body.startsWith("-") || body.startsWith("=")) throw new FlagError(`bad flag syntax: ${arg}`);
    const eq = body.indexOf("=");
    const name = eq < 0 ? body : body.slice(0, eq);
    const kind = spec[name];
    if (!kind) throw new FlagError(`flag provided but not defined: -${name}`);
    let value: string | undefined = eq < 0 ? undefined : body.slice(eq + 1);
    if (kind === "bool") {
      if (value === undefined) flags[name] = true;
      else if (["1", "t", "T", "true", "TRUE", "True"].includes(value)) flags[name] = true;
      else if (["0", "f", "F", "false", "FALSE", "False"].includes(value)) flags[name] = false;
      else throw new FlagError(`invalid boolean value ${JSON.stringify(value)} for -${name}: parse error`);
      continue;
    }
    if (value === undefined) {
      if (i + 1 >= combined.length) throw new FlagError(`flag needs an argument: -${name}`);
      value = combined[++i]!;
    }
    if (kind === "uint") {
      if (!/^\d+$/.test(value)) throw new FlagError(`invalid value ${JSON.stringify(value)} for flag -${name}: parse error`);
      flags[name] = Number(value);
    } else if (kind === "repeat") flags[name] = [...((flags[name] as string[] | undefined) ?? []), value];
    else flags[name] = value;
  }
  return { flags, positional: combined.slice(i) };
}
