import { SECRET_REF_FORMAT } from "./fields.js";

/** Dotted paths of every `format: "secret-ref"` property in a JSON Schema (nested objects included). */
export function secretFieldPaths(jsonSchema: Record<string, unknown>): string[] {
  const found = new Set<string>();
  collect(jsonSchema, "", found);
  return [...found];
}

function collect(node: unknown, prefix: string, found: Set<string>): void {
  if (node === null || typeof node !== "object") return;
  const schema = node as Record<string, unknown>;
  if (schema.format === SECRET_REF_FORMAT && prefix) found.add(prefix);
  for (const keyword of ["anyOf", "oneOf", "allOf"]) {
    const branches = schema[keyword];
    if (Array.isArray(branches)) for (const branch of branches) collect(branch, prefix, found);
  }
  const properties = schema.properties;
  if (properties && typeof properties === "object") {
    for (const [name, child] of Object.entries(properties as Record<string, unknown>)) {
      collect(child, prefix ? `${prefix}.${name}` : name, found);
    }
  }
}
