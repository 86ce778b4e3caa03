import { fileURLToPath } from "node:url";

/**
 * Host path of the compiled in-jail supervisor's entry. It is bound read-only into every jail, and
 * its `in-jail/` directory of modules next to it.
 */
export function defaultSupervisorScript(): string {
  return fileURLToPath(new URL("./supervisor.mjs", import.meta.url));
}
