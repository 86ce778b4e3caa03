import type { ConformanceCaseName } from "./options.js";
import { ConformanceSkip } from "./skip.js";
import type { ConformanceWorld } from "./world.js";

export interface ConformanceCase {
  name: ConformanceCaseName;
  run(world: ConformanceWorld): Promise<void>;
}

/** Skip (with the reason) when the worker does not advertise a hook the case needs. */
export function requireMethods(world: ConformanceWorld, methods: readonly string[]): void {
  const missing = methods.filter((method) => !world.client.supportedMethods.includes(method));
  if (missing.length > 0) throw new ConformanceSkip(`worker does not advertise ${missing.join(", ")}`);
}
