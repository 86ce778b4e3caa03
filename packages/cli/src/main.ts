#!/usr/bin/env node
import { packageVersionOf } from "@paperclip-sandbox/kit";
import { parseCommandLine } from "./cli-args.js";
import { benchCommand } from "./commands/bench.js";
import { probeCommand, validateCommand } from "./commands/diagnostics.js";
import { emulateCommand } from "./commands/emulate.js";
import { leasesGcCommand, leasesLsCommand } from "./commands/leases.js";
import { runCommand } from "./commands/run.js";
import { CliFailure, UsageError, describeError } from "./errors.js";
import { USAGE } from "./usage.js";
import { err, flushOutput, out } from "./io.js";

async function main(argv: string[]): Promise<number> {
  const parsed = parseCommandLine(argv);
  if (parsed.command === "help" || parsed.values.help === true) {
    out(USAGE);
    return 0;
  }
  if (parsed.command === "version") {
    out(`paperclip-sandbox ${packageVersionOf(import.meta.url)}\n`);
    return 0;
  }
  const { values } = parsed;
  const noPositionals = () => {
    if (parsed.positionals.length > 0 || parsed.rest.length > 0) {
      throw new UsageError(`${parsed.command}: unexpected argument '${[...parsed.positionals, ...parsed.rest][0]}'`);
    }
  };
  switch (parsed.command) {
    case "run":
      return runCommand({ values, command: [...parsed.positionals, ...parsed.rest] });
    case "probe":
      noPositionals();
      return probeCommand(values);
    case "validate":
      noPositionals();
      return validateCommand(values);
    case "bench":
      if (parsed.positionals.length > 0) throw new UsageError(`bench: unexpected argument '${parsed.positionals[0]}' (put a custom command after --)`);
      return benchCommand(values, parsed.rest);
    case "leases ls":
      noPositionals();
      return leasesLsCommand(values);
    case "leases gc":
      noPositionals();
      return leasesGcCommand(values);
    case "emulate":
      return emulateCommand(parsed.positionals, values);
  }
}

main(process.argv.slice(2))
  .then(async (code) => {
    await flushOutput();
    process.exit(code);
  })
  .catch(async (error: unknown) => {
    const code = error instanceof CliFailure ? error.exitCode : 1;
    err(`paperclip-sandbox: ${describeError(error)}\n`);
    await flushOutput();
    process.exit(code);
  });
