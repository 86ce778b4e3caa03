import { fileURLToPath } from "node:url";

/** Host path of the compiled in-jail supervisor script (bound read-only into every jail). */
export function defaultSupervisorScript(): string {
  return fileURLToPath(new URL("./supervisor.js", import.meta.url));
}
