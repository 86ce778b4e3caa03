import type { ConformanceCase } from "./case.js";
import { configAndProbeCases } from "./cases/config-and-probe.js";
import { commandChannelCases } from "./cases/command-channel.js";
import { duplexCases } from "./cases/duplex.js";
import { loginPtyCases } from "./cases/login-pty.js";
import { executeCases } from "./cases/execute.js";
import { leaseLifecycleCases } from "./cases/lease-lifecycle.js";
import { syncCases } from "./cases/sync.js";
import { hostedFailureCases } from "./cases/hosted-failures.js";
import { templateCases } from "./cases/templates.js";
import { CONFORMANCE_CASE_NAMES, type ConformanceCaseName, type ConformanceOptions } from "./options.js";
import { ConformanceSkip } from "./skip.js";
import type { ConformanceWorld } from "./world.js";

const ALL_CASES = new Map<ConformanceCaseName, ConformanceCase>(
  [...configAndProbeCases, ...leaseLifecycleCases, ...executeCases, ...syncCases, ...duplexCases, ...commandChannelCases, ...loginPtyCases, ...templateCases, ...hostedFailureCases].map((c) => [
    c.name,
    c,
  ]),
);

/**
 * Every case, in the order they must run (nothing-left-behind last). A case named in
 * `opts.skip` throws ConformanceSkip with that reason instead of running.
 * Start the world with `startConformanceWorld(opts)` and run the cases one at a time.
 */
export function conformanceCases(opts: ConformanceOptions): ConformanceCase[] {
  return CONFORMANCE_CASE_NAMES.map((name) => {
    const found = ALL_CASES.get(name);
    if (!found) throw new Error(`conformance case ${name} has no implementation`);
    const reason = opts.skip?.[name];
    // Cases read the options given here (not the ones the world started with), so a caller
    // can vary e.g. invalidConfigs without starting another worker.
    // A prototype link, not a copy: the world's getters (its client, after a restart) stay live.
    if (reason === undefined) return { name, run: (world) => found.run(Object.assign(Object.create(world) as ConformanceWorld, { options: opts })) };
    return {
      name,
      run: async () => {
        throw new ConformanceSkip(reason);
      },
    };
  });
}
