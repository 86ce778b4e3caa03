import type { z } from "zod";

/** Wrappers that leave the value's shape alone: an optional, defaulted or nullable field, a transform's input side. */
function unwrapOnce(schema: z.core.$ZodType): z.core.$ZodType | undefined {
  const def = schema._zod.def as unknown as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
  if (def.type === "optional" || def.type === "default" || def.type === "nullable" || def.type === "prefault" || def.type === "readonly") {
    return def.innerType;
  }
  if (def.type === "pipe") return def.in;
  return undefined;
}

/** The schema under every wrapper, and every schema on the way (whose metadata counts too). */
function unwrapChain(schema: z.core.$ZodType): z.core.$ZodType[] {
  const chain = [schema];
  for (let next = unwrapOnce(schema); next; next = unwrapOnce(next)) chain.push(next);
  return chain;
}

function core(schema: z.core.$ZodType): z.core.$ZodType {
  return unwrapChain(schema).at(-1)!;
}

function objectShape(schema: z.core.$ZodType): Record<string, z.core.$ZodType> | undefined {
  const def = core(schema)._zod.def as unknown as { type: string; shape?: Record<string, z.core.$ZodType> };
  return def.type === "object" ? def.shape : undefined;
}

function arrayElement(schema: z.core.$ZodType): z.core.$ZodType | undefined {
  const def = core(schema)._zod.def as unknown as { type: string; element?: z.core.$ZodType };
  return def.type === "array" ? def.element : undefined;
}

/** The `title` given with `.meta()` / `fields.ui()` anywhere on the field's wrapper chain. */
export function fieldTitle(schema: z.core.$ZodType | undefined, registry: z.core.$ZodRegistry<{ title?: string }>): string | undefined {
  if (!schema) return undefined;
  for (const link of unwrapChain(schema)) {
    const title = registry.get(link)?.title;
    if (typeof title === "string") return title;
  }
  return undefined;
}

const isBlank = (value: unknown): boolean => typeof value === "string" && value.trim() === "";

/** Where the items of a list sat before blank ones were dropped, by the list's path (JSON of its keys). */
export type ItemPositions = Map<string, number[]>;

/**
 * The host's form sends `""` for a text field the operator typed in and cleared, and `null` for a list
 * item added and left empty. Both mean "not set": a blank optional field is removed (its default, if
 * any, applies), and blank or null items of a list of scalars are dropped (`positions` records where
 * the others were, so an error still names the item the operator sees). Nested objects likewise.
 * Required fields keep their blank value, so their own rule reports it.
 */
export function unsetBlanks(
  input: Record<string, unknown>,
  shape: Record<string, z.core.$ZodType>,
  positions: ItemPositions = new Map(),
  prefix: readonly PropertyKey[] = [],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    const field = shape[key];
    if (!field) {
      out[key] = value;
      continue;
    }
    if (isBlank(value) && acceptsUndefined(field)) continue;
    out[key] = unsetNestedBlanks(value, field, positions, [...prefix, key]);
  }
  return out;
}

function unsetNestedBlanks(value: unknown, field: z.core.$ZodType, positions: ItemPositions, path: readonly PropertyKey[]): unknown {
  const shape = objectShape(field);
  if (shape && value !== null && typeof value === "object" && !Array.isArray(value)) {
    return unsetBlanks(value as Record<string, unknown>, shape, positions, path);
  }
  const element = arrayElement(field);
  if (element && Array.isArray(value) && !objectShape(element)) {
    const kept = value.map((item, index) => ({ item, index })).filter(({ item }) => item !== null && item !== undefined && !isBlank(item));
    if (kept.length < value.length)
      positions.set(
        JSON.stringify(path),
        kept.map(({ index }) => index),
      );
    return kept.map(({ item }) => item);
  }
  return value;
}

/** `path` of an issue in the cleaned config, with list indexes as the operator entered them. */
export function originalPath(path: readonly PropertyKey[], positions: ItemPositions): PropertyKey[] {
  return path.map((segment, i) => {
    if (typeof segment !== "number") return segment;
    return positions.get(JSON.stringify(path.slice(0, i)))?.[segment] ?? segment;
  });
}

/** An optional field, or one with a default (zod marks those "defaulted"). */
function acceptsUndefined(field: z.core.$ZodType): boolean {
  return field._zod.optin !== undefined;
}

/**
 * How an error names the field at `path`: its title ("Memory limit (MiB)"), a list item as
 * "Allowed host names, item 2", a nested field as "Auth / Password". The key stands in for a missing title.
 */
export function labelForPath(root: z.core.$ZodType, path: readonly PropertyKey[], registry: z.core.$ZodRegistry<{ title?: string }>): string {
  let node: z.core.$ZodType | undefined = root;
  let label = "";
  for (const segment of path) {
    if (typeof segment === "number") {
      label += `, item ${segment + 1}`;
      node = node && arrayElement(node);
      continue;
    }
    const child: z.core.$ZodType | undefined = node && objectShape(node)?.[String(segment)];
    const name = fieldTitle(child, registry) ?? String(segment);
    label = label ? `${label} / ${name}` : name;
    node = child;
  }
  return label;
}
