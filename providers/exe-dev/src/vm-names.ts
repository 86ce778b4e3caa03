import { createHash } from "node:crypto";

/**
 * VM names and the tags that carry a lease's labels. exe.dev names are 5–63 characters of
 * lower-case letters and digits with single hyphens, starting with a letter, and must not end in
 * `-<digits>`; tags are `[a-z][a-z0-9_-]*` words without values.
 */
const VM_NAME_RULE = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

/** `<prefix>-<environment hash>-v<nonce>`: the last part starts with a letter, so it is never all digits. */
export function vmNameFor(prefix: string, environmentId: string, nonce: string): string {
  const env = createHash("sha256").update(environmentId).digest("hex").slice(0, 6);
  const name = `${prefix}-${env}-v${nonce.replace(/[^a-z0-9]/g, "").slice(0, 8)}`;
  if (!isVmName(name)) throw new Error(`internal: generated VM name ${name} breaks exe.dev's rules`);
  return name;
}

/** `isVmName`'s rule in words, for a config error. */
export const VM_NAME_RULE_TEXT = "must be an exe.dev VM name (5 to 63 lower-case letters and digits with single hyphens, starting with a letter, not ending in a hyphen and digits)";

export function isVmName(name: string): boolean {
  return name.length >= 5 && name.length <= 63 && VM_NAME_RULE.test(name) && !/-\d+$/.test(name);
}

/**
 * A label as a tag: `<key>_<value>` when the value is plain (`[a-z0-9-]`), else `<key>__<hex of
 * the value>`, so every label value survives the tag rule and reads back exactly.
 */
export function tagOf(key: string, value: string): string {
  return /^[a-z0-9-]+$/.test(value) ? `${key}_${value}` : `${key}__${Buffer.from(value, "utf8").toString("hex")}`;
}

export function tagsOf(labels: Readonly<Record<string, string>>): string[] {
  return Object.entries(labels).map(([key, value]) => tagOf(key, value));
}

/** The labels among a VM's tags (the `paperclip-…` ones); other tags are left out. */
export function labelsOf(tags: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const tag of tags) {
    const match = /^(paperclip-[a-z-]+)_(_?)(.*)$/.exec(tag);
    if (!match) continue;
    const [, key, hex, value] = match;
    if (hex && !/^([0-9a-f]{2})+$/.test(value!)) continue;
    labels[key!] = hex ? Buffer.from(value!, "hex").toString("utf8") : value!;
  }
  return labels;
}
