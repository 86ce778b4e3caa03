// The methods of the ModalClient and TaskCommandRouter services the two SDKs bundle (ts-proto
// service definitions in `modal` 0.11.1 and `modal-0.7` = modal 0.7.6), read from the installed packages.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { SdkOperation } from "@paperclip-sandbox/emulator-kit";
import { CONTROL_SERVICE, groupOf, ROUTER_SERVICE } from "../coverage.js";

const NODE_MODULES = fileURLToPath(new URL("../../../../node_modules/", import.meta.url));

export function modalSdkOperations(): SdkOperation[] {
  const found = new Map<string, { service: "ModalClient" | "TaskCommandRouter"; method: string; sdks: string[] }>();
  for (const [pkg, label] of [
    ["modal", "0.11.1"],
    ["modal-0.7", "0.7.6"],
  ] as const) {
    const source = readFileSync(`${NODE_MODULES}${pkg}/dist/index.js`, "utf8");
    for (const service of ["ModalClient", "TaskCommandRouter"] as const) {
      const start = source.indexOf(`var ${service}Definition = {`);
      if (start < 0) throw new Error(`${pkg}: no ${service}Definition in the bundle`);
      const body = source.slice(start, source.indexOf("\n};", start));
      for (const match of body.matchAll(/\n {4}\w+: \{\n {6}name: "(\w+)",/g)) {
        const key = `${service}.${match[1]}`;
        const entry = found.get(key) ?? { service, method: match[1]!, sdks: [] };
        entry.sdks.push(label);
        found.set(key, entry);
      }
    }
  }
  return [...found.values()].map(({ service, method, sdks }) => ({
    group: groupOf(service, method),
    name: method,
    route: `/${service === "ModalClient" ? CONTROL_SERVICE : ROUTER_SERVICE}/${method}${sdks.length === 1 ? ` (${sdks[0]} only)` : ""}`,
  }));
}
