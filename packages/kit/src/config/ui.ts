import { z } from "zod";

/**
 * How a config field looks in the Paperclip host's environment form, which it generates from the
 * manifest's JSON Schema (paperclipai 2026.916.1 honours `title`, `description`, `examples` on number
 * fields, `default` as the placeholder, `x-paperclip-advanced` and `x-paperclip-group`).
 */
export interface FieldUi {
  /** The label, without the unit: "Memory limit". Without one the host makes it from the key ("Memory Mb"). */
  title?: string;
  /** Appended to the title in parentheses: "MiB" gives "Memory limit (MiB)". Helpers with a fixed unit set it. */
  unit?: string;
  /** Plain text: the host shows it as is, so no Markdown (no backticks). */
  description?: string;
  /**
   * The section the field belongs to (`x-paperclip-group`). The host shows it as a heading inside
   * "Advanced options" for advanced fields; every field names one so the schema says where it belongs.
   */
  group?: string;
  /** Under the host form's collapsed "Advanced options" (`x-paperclip-advanced`): tuning, paths, fault injection. */
  advanced?: boolean;
  /** Example values (`examples`); the host offers numeric ones as suggestions in the input. */
  examples?: readonly unknown[];
}

export const GROUP_KEYWORD = "x-paperclip-group";
export const ADVANCED_KEYWORD = "x-paperclip-advanced";

/** The JSON Schema keywords for `ui` (only those set). */
function uiKeywords(ui: FieldUi): Record<string, unknown> {
  const keywords: Record<string, unknown> = {};
  if (ui.title !== undefined) keywords.title = ui.unit ? `${ui.title} (${ui.unit})` : ui.title;
  if (ui.description !== undefined) keywords.description = ui.description;
  if (ui.group !== undefined) keywords[GROUP_KEYWORD] = ui.group;
  if (ui.advanced) keywords[ADVANCED_KEYWORD] = true;
  if (ui.examples !== undefined) keywords.examples = [...ui.examples];
  return keywords;
}

/**
 * Longest input a config field takes, by what it holds. Every text field has one (an operator's typo
 * or a hostile config must not carry megabytes into logs, labels, fingerprints and vendor calls).
 */
export const FIELD_MAX_LENGTH = {
  /** A name, id, template, region, tag or other short option: what `fields.ui` gives a text field without its own bound. */
  name: 256,
  /** A container image reference: registry host, path, tag and digest. */
  image: 512,
  url: 2048,
  /** PATH_MAX. */
  path: 4096,
  /** One item of a list (a host name, a CIDR, a glob). */
  listItem: 1024,
  /** One word of a command, a script included. */
  commandWord: 16_384,
  /** A token, key or password. */
  secret: 16_384,
  /** A whole document kept as one secret, e.g. a kubeconfig with embedded certificates. */
  document: 262_144,
  /** A key of a map field (Kubernetes' longest label/annotation key: a 253-character prefix, "/", a 63-character name). */
  mapKey: 317,
  /** A value of a map field. */
  mapValue: 4096,
} as const;

/** Most items of a list field and entries of a map field. */
export const FIELD_MAX_ITEMS = 256;

/**
 * Attaches `ui` to a schema; the keywords appear on the field in the manifest's JSON Schema. A text
 * field without a maximum length gets `FIELD_MAX_LENGTH.name` (give a longer one with `.max()` first
 * where the field holds more); a list without a maximum gets `FIELD_MAX_ITEMS`; a map gets bounds on
 * its entries, keys and values (checked on the server).
 */
export function withUi<T extends z.ZodType>(schema: T, ui: FieldUi): T {
  const bounded = withDefaultBounds(schema);
  const keywords = uiKeywords(ui);
  return Object.keys(keywords).length === 0 ? bounded : (bounded.meta(keywords) as T);
}

function hasCheck(schema: z.ZodType, check: string): boolean {
  return (schema._zod.def.checks ?? []).some((c) => (c._zod.def as { check?: string }).check === check);
}

function withDefaultBounds<T extends z.ZodType>(schema: T): T {
  if (schema instanceof z.ZodString && schema.maxLength === null) return schema.max(FIELD_MAX_LENGTH.name) as unknown as T;
  if (schema instanceof z.ZodArray && !hasCheck(schema, "max_length")) return schema.max(FIELD_MAX_ITEMS) as unknown as T;
  if (schema instanceof z.ZodRecord) {
    return schema.superRefine((value, ctx) => {
      const entries = Object.entries(value as Record<string, unknown>);
      if (entries.length > FIELD_MAX_ITEMS) ctx.addIssue({ code: "custom", message: `must have at most ${FIELD_MAX_ITEMS} entries` });
      for (const [key, entry] of entries) {
        if (key.length > FIELD_MAX_LENGTH.mapKey) ctx.addIssue({ code: "custom", message: `key ${JSON.stringify(key.slice(0, 40))}... must be at most ${FIELD_MAX_LENGTH.mapKey} characters` });
        else if (typeof entry === "string" && entry.length > FIELD_MAX_LENGTH.mapValue)
          ctx.addIssue({ code: "custom", message: `the value of ${JSON.stringify(key)} must be at most ${FIELD_MAX_LENGTH.mapValue} characters` });
      }
    }) as unknown as T;
  }
  return schema;
}

/** Item keywords the host's form checks on list items without ever showing the item's error. */
const SILENT_ITEM_KEYWORDS = ["pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const MARKDOWN = /`|\*\*|\]\(/;

/**
 * What would look wrong in the host's form, one phrase per problem (empty when none): a field without a
 * title or a group, two fields with one title, a description with Markdown (shown literally), a list
 * item rule the form would enforce silently. Run it over every provider's manifest schema in tests.
 */
export function configSchemaUiProblems(jsonSchema: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const properties = (jsonSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
  if (Object.keys(properties).length === 0) problems.push("the schema has no fields");
  const keyByTitle = new Map<string, string>();
  for (const [key, field] of Object.entries(properties)) {
    if (typeof field.title !== "string" || field.title.trim() === "") problems.push(`${key}: no title`);
    else if (keyByTitle.has(field.title)) problems.push(`${key}: same title as ${keyByTitle.get(field.title)} ("${field.title}")`);
    else keyByTitle.set(field.title, key);
    if (typeof field[GROUP_KEYWORD] !== "string" || (field[GROUP_KEYWORD] as string).trim() === "") problems.push(`${key}: no ${GROUP_KEYWORD}`);
    checkNode(key, field, problems);
  }
  return problems;
}

function checkNode(path: string, node: Record<string, unknown>, problems: string[]): void {
  if (typeof node.description === "string" && MARKDOWN.test(node.description)) {
    problems.push(`${path}: description has Markdown, which the host shows literally: ${JSON.stringify(node.description)}`);
  }
  const items = node.items as Record<string, unknown> | undefined;
  if (items && typeof items === "object" && items.type !== "object") {
    for (const keyword of SILENT_ITEM_KEYWORDS) {
      if (keyword in items) problems.push(`${path}: list items have "${keyword}" (the host's form would disable saving without showing why)`);
    }
  }
  if (items && typeof items === "object") checkNode(`${path}[]`, items, problems);
  for (const [name, child] of Object.entries((node.properties ?? {}) as Record<string, Record<string, unknown>>)) {
    checkNode(`${path}.${name}`, child, problems);
  }
}
