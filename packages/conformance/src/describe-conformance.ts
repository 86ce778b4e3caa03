import { afterAll, beforeAll, describe, it } from "vitest";
import { conformanceCases } from "./cases.js";
import type { ConformanceOptions } from "./options.js";
import { ConformanceSkip } from "./skip.js";
import { startConformanceWorld, type ConformanceWorld } from "./world.js";

const CASE_TIMEOUT_MS = 90_000;

/** One vitest `describe` per provider: a worker for the block, one test per case, skips with reasons. */
export function describeConformance(opts: ConformanceOptions): void {
  describe(`conformance: ${opts.name}`, () => {
    let world: ConformanceWorld | undefined;

    beforeAll(async () => {
      world = await startConformanceWorld(opts);
    }, 60_000);

    afterAll(async () => {
      await world?.close();
    }, 30_000);

    for (const testCase of conformanceCases(opts)) {
      const declaredSkip = opts.skip?.[testCase.name];
      const title = declaredSkip === undefined ? testCase.name : `${testCase.name} (skipped: ${declaredSkip})`;
      it(
        title,
        async (context) => {
          if (!world) throw new Error("conformance world did not start (see beforeAll)");
          try {
            await testCase.run(world);
          } catch (error) {
            if (error instanceof ConformanceSkip) {
              // Reporters hide skipped tests of a passing file; the reason must still reach the log.
              console.info(`[conformance ${opts.name}] ${testCase.name} skipped: ${error.reason}`);
              context.skip(error.reason);
              return;
            }
            throw error;
          }
        },
        CASE_TIMEOUT_MS,
      );
    }
  });
}
