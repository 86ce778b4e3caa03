import { parseArgs, type ParseArgsConfig } from "node:util";
import { UsageError } from "./errors.js";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Flags every provider-facing command accepts. */
const PROVIDER_OPTIONS = {
  provider: { type: "string", short: "p" },
  driver: { type: "string" },
  config: { type: "string", short: "c" },
  set: { type: "string", multiple: true },
  secret: { type: "string", multiple: true },
  "secret-file": { type: "string", multiple: true },
  db: { type: "string" },
  environment: { type: "string" },
  verbose: { type: "boolean", short: "v" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

const COMMAND_OPTIONS = {
  run: {
    ...PROVIDER_OPTIONS,
    workspace: { type: "string", short: "w" },
    reuse: { type: "boolean" },
    timings: { type: "boolean" },
    timeout: { type: "string" },
    env: { type: "string", multiple: true, short: "e" },
    exclude: { type: "string", multiple: true },
  },
  probe: { ...PROVIDER_OPTIONS, json: { type: "boolean" } },
  validate: { ...PROVIDER_OPTIONS, json: { type: "boolean" } },
  bench: {
    ...PROVIDER_OPTIONS,
    samples: { type: "string", short: "n" },
    targets: { type: "string" },
    json: { type: "boolean" },
    out: { type: "string", short: "o" },
    "sync-samples": { type: "string" },
    "sync-size-mb": { type: "string" },
    emulator: { type: "string" },
  },
  emulate: { port: { type: "string" }, host: { type: "string" }, list: { type: "boolean" }, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  "leases ls": { db: { type: "string" }, json: { type: "boolean" }, all: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  "leases gc": {
    db: { type: "string" },
    provider: { type: "string", short: "p" },
    json: { type: "boolean" },
    yes: { type: "boolean", short: "y" },
    "dry-run": { type: "boolean" },
    "min-age": { type: "string" },
    "include-idle": { type: "boolean" },
    config: { type: "string", short: "c" },
    set: { type: "string", multiple: true },
    secret: { type: "string", multiple: true },
    "secret-file": { type: "string", multiple: true },
    verbose: { type: "boolean", short: "v" },
    help: { type: "boolean", short: "h" },
  },
} as const satisfies Record<string, Options>;

type CommandName = keyof typeof COMMAND_OPTIONS;

export interface ParsedCommand {
  command: CommandName | "help" | "version";
  values: Record<string, string | boolean | string[] | undefined>;
  /** Positionals before `--` (unused by most commands). */
  positionals: string[];
  /** Everything after `--` (the command for `run` and `bench`). */
  rest: string[];
}

export function parseCommandLine(argv: string[]): ParsedCommand {
  const [first, ...tail] = argv;
  if (first === undefined || first === "help" || first === "--help" || first === "-h") {
    return { command: "help", values: {}, positionals: tail, rest: [] };
  }
  if (first === "--version" || first === "version") return { command: "version", values: {}, positionals: [], rest: [] };
  let command: CommandName;
  let args = tail;
  if (first === "leases") {
    const sub = tail[0];
    if (sub !== "ls" && sub !== "gc") throw new UsageError(`unknown leases subcommand '${sub ?? ""}' (expected: ls, gc)`);
    command = `leases ${sub}`;
    args = tail.slice(1);
  } else if (first in COMMAND_OPTIONS) {
    command = first as CommandName;
  } else {
    throw new UsageError(`unknown command '${first}' (expected: run, probe, validate, bench, leases ls, leases gc, emulate)`);
  }
  const dashDash = args.indexOf("--");
  const flags = dashDash === -1 ? args : args.slice(0, dashDash);
  const rest = dashDash === -1 ? [] : args.slice(dashDash + 1);
  let parsed;
  try {
    parsed = parseArgs({ args: flags, options: COMMAND_OPTIONS[command], allowPositionals: true, strict: true });
  } catch (error) {
    const message = (error as Error).message.split("\n")[0]!.replace(/\. To specify a positional.*$/, "");
    throw new UsageError(`${command}: ${message}`);
  }
  return { command, values: parsed.values as ParsedCommand["values"], positionals: parsed.positionals, rest };
}

/** Parses a duration: `500ms`, `30s`, `5m`, `1h`, or a bare number of milliseconds. */
export function parseDuration(flag: string, raw: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw.trim());
  if (!match) throw new UsageError(`${flag}: expected a duration like 30s, 5m or 1500ms, got '${raw}'`);
  const n = Number(match[1]);
  const unit = match[2] ?? "ms";
  const factor = unit === "ms" ? 1 : unit === "s" ? 1000 : unit === "m" ? 60_000 : 3_600_000;
  return Math.round(n * factor);
}

export function parsePositiveInt(flag: string, raw: string): number {
  if (!/^\d+$/.test(raw.trim()) || Number(raw) < 1) throw new UsageError(`${flag}: expected a positive integer, got '${raw}'`);
  return Number(raw);
}

export function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.map(String) : typeof value === "string" ? [value] : [];
}
