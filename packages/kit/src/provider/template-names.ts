import { createHash, randomBytes } from "node:crypto";
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

/** The owner labels a digest name covers, in this order. */
const DIGEST_OWNER_LABELS = ["paperclip-provider", "paperclip-company", "paperclip-environment"] as const;
/** `pc-<16 hex: digest of the owner labels>-<8 hex random>`. */
const DIGEST_TEMPLATE_NAME = /^pc-([0-9a-f]{16})-[0-9a-f]{8}$/;

const ownerDigest = (labels: Readonly<Record<string, string | undefined>>): string =>
  createHash("sha256")
    .update(DIGEST_OWNER_LABELS.map((key) => labels[key] ?? "").join("\0"))
    .digest("hex")
    .slice(0, 16);

/**
 * Short template names for vendors that keep no labels and allow names too short for the owner's ids
 * (boxd snapshots, Modal image names: under 64 characters): `pc-<16 hex>-<8 hex random>`, the first
 * part a digest of the provider, company and environment labels in `labels`. The owner cannot be read
 * back, only checked (`digestTemplateNameOwner`). Only `[a-z0-9-]`, a DNS label.
 */
export function digestTemplateName(labels: Readonly<Record<string, string | undefined>>): string {
  return `pc-${ownerDigest(labels)}-${randomBytes(4).toString("hex")}`;
}

export const isDigestTemplateName = (name: string): boolean => DIGEST_TEMPLATE_NAME.test(name);

/**
 * The owner labels to check a digest name against `expected` (the owner the kit is about to check,
 * as `TemplateDeclaration.labels` receives it): `expected` itself when the digest is its, else labels
 * that differ from it in company and environment (which owner is not recoverable from a digest);
 * null for a name of another shape.
 */
export function digestTemplateNameOwner(name: string, expected: Readonly<Record<string, string>>): Record<string, string> | null {
  const digest = DIGEST_TEMPLATE_NAME.exec(name)?.[1];
  if (!digest) return null;
  if (digest === ownerDigest(expected)) return { ...expected };
  return { "paperclip-provider": expected["paperclip-provider"] ?? "", "paperclip-company": `digest ${digest}`, "paperclip-environment": `digest ${digest}` };
}
