// The operations of the e2b and novita-sandbox SDKs' generated clients, read from the installed
// packages: the control plane's and envd's REST paths (the `paths` interfaces of their openapi
// typings) and the methods of the Connect services whose descriptors the e2b bundle embeds.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { SdkOperation } from "@paperclip-sandbox/emulator-kit";

const NODE_MODULES = fileURLToPath(new URL("../../../../node_modules/", import.meta.url));
const require = createRequire(import.meta.url);

/** Every `METHOD /path` of an openapi-typescript `interface <name> {` block, whatever its indentation. */
function pathsOf(source: string, marker: string): string[] {
  const start = source.indexOf(marker);
  if (start < 0) return [];
  let depth = 0;
  let end = source.indexOf("{", start);
  for (; end < source.length; end++) {
    if (source[end] === "{") depth++;
    else if (source[end] === "}" && --depth === 0) break;
  }
  const lines = source.slice(source.indexOf("{", start) + 1, end).split("\n");
  const indent = /^(\s+)"\//.exec(lines.find((line) => /^\s+"\//.test(line)) ?? "")?.[1]?.length ?? 2;
  const ops: string[] = [];
  let current: string | undefined;
  for (const line of lines) {
    const key = new RegExp(`^ {${indent}}"(/[^"]*)": \\{`).exec(line);
    if (key) current = key[1];
    const verb = new RegExp(`^ {${indent * 2}}(get|put|post|delete|patch)\\??: (.*)`).exec(line);
    if (verb && current && !verb[2]!.startsWith("never")) ops.push(`${verb[1]!.toUpperCase()} ${current}`);
  }
  return ops;
}

export function envdSdkOperations(): SdkOperation[] {
  const e2bTypes = readFileSync(`${NODE_MODULES}e2b/dist/index.d.ts`, "utf8");
  const novitaTypes = readFileSync(`${NODE_MODULES}novita-sandbox/dist/index-Bsc4EeD3.d.ts`, "utf8");
  const api = new Set([...pathsOf(e2bTypes, "interface paths {"), ...pathsOf(novitaTypes, "interface paths {")]);
  const envd = new Set(pathsOf(e2bTypes, "interface paths$1 {"));
  const ops: SdkOperation[] = [...api].sort().map((name) => ({ group: "api", name, route: name }));
  ops.push(...[...envd].sort().map((name) => ({ group: "envd", name, route: name })));
  const descriptor = require(`${NODE_MODULES}protobufjs/ext/descriptor/index.js`) as {
    FileDescriptorProto: { decode(bytes: Buffer): { package: string; service?: Array<{ name: string; method: Array<{ name: string }> }> } };
  };
  const bundle = readFileSync(`${NODE_MODULES}e2b/dist/index.js`, "utf8");
  for (const match of bundle.matchAll(/fileDesc\)\("([A-Za-z0-9+/=]+)"/g)) {
    const file = descriptor.FileDescriptorProto.decode(Buffer.from(match[1]!, "base64"));
    for (const service of file.service ?? []) {
      for (const method of service.method) ops.push({ group: `${file.package}.${service.name}`, name: method.name, route: `/${file.package}.${service.name}/${method.name}` });
    }
  }
  return ops;
}
