import { randomBytes } from "node:crypto";
import { labelValue } from "../lease/labels.js";

/**
 * Template names that carry their owner, for vendors whose snapshots keep a name but no labels
 * (Daytona snapshots, E2B snapshot templates): `paperclip-tpl-<n>-<company>-<m>-<environment>-<12 hex>`,
 * each id as the kit writes it into a label and prefixed by its length, so no id can be read as
 * another. Only `[a-z0-9._-]` (the label alphabet), so it fits vendor name rules. A name without the
 * prefix is not a template (an operator's own snapshot or template in the same config field).
 */
export const TEMPLATE_NAME_PREFIX = "paperclip-tpl-";

export const isOwnedTemplateName = (name: string): boolean => name.startsWith(TEMPLATE_NAME_PREFIX);

/** A fresh template name for the owner in `labels` (the setup sandbox's kit labels). */
export function ownedTemplateName(labels: Readonly<Record<string, string>>): string {
  const part = (key: string) => {
    const value = labels[key];
    if (!value) throw new Error(`the setup sandbox has no ${key} label, so its template could not name its owner`);
    return `${value.length}-${value}`;
  };
  return `${TEMPLATE_NAME_PREFIX}${part("paperclip-company")}-${part("paperclip-environment")}-${randomBytes(6).toString("hex")}`;
}

/** The owner labels (provider, company, environment) a name from `ownedTemplateName` carries; null for any other name. */
export function templateNameOwner(name: string, driverKey: string): Record<string, string> | null {
  if (!isOwnedTemplateName(name)) return null;
  let rest = name.slice(TEMPLATE_NAME_PREFIX.length);
  const take = (): string | null => {
    const match = /^(\d{1,3})-/.exec(rest);
    if (!match) return null;
    const length = Number(match[1]);
    const value = rest.slice(match[0].length, match[0].length + length);
    if (value.length !== length || rest[match[0].length + length] !== "-") return null;
    rest = rest.slice(match[0].length + length + 1);
    return value;
  };
  const company = take();
  const environment = company === null ? null : take();
  if (company === null || environment === null || !/^[0-9a-f]{12}$/.test(rest)) return null;
  return { "paperclip-provider": labelValue(driverKey), "paperclip-company": company, "paperclip-environment": environment };
}
