// The operations of the SDK's generated clients (@daytona/toolbox-api-client, @daytona/api-client),
// read from the installed packages: each `XxxApiAxiosParamCreator` method with its path and verb.
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { SdkOperation } from "@paperclip-sandbox/emulator-kit";

const NODE_MODULES = fileURLToPath(new URL("../../../../node_modules/", import.meta.url));

function operationsOf(pkg: string, plane: "toolbox" | "api"): SdkOperation[] {
  const dir = `${NODE_MODULES}${pkg}/src/api`;
  const out: SdkOperation[] = [];
  for (const file of readdirSync(dir)
    .filter((name) => name.endsWith("-api.js"))
    .sort()) {
    const source = readFileSync(`${dir}/${file}`, "utf8").split("ApiFp = function")[0]!;
    const group = `${plane}/${file.replace(/-api\.js$/, "")}`;
    const method = /\n\s{8}(\w+): async \([^)]*\)[^{]*\{[\s\S]*?const localVarPath = `([^`]*)`[\s\S]*?method: '(\w+)'/g;
    for (const match of source.matchAll(method)) {
      const path = match[2]!.replace(/\$\{encodeURIComponent\(String\((\w+)\)\)\}/g, "{$1}");
      out.push({ group, name: match[1]!, route: `${match[3]} ${plane === "api" ? "/api" : "/toolbox/{id}"}${path}` });
    }
  }
  return out;
}

export function daytonaSdkOperations(): SdkOperation[] {
  return [...operationsOf("@daytona/toolbox-api-client", "toolbox"), ...operationsOf("@daytona/api-client", "api")];
}
