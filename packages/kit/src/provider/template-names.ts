import { createHash, randomBytes } from "node:crypto";

/**
 * Template names that carry their owner, for vendors whose snapshots keep a name but no labels
 * (Daytona snapshots, E2B snapshot templates, boxd snapshots): `pc-<16 hex>-<8 hex>`, where the
 * 16 hex digits are a SHA-256 digest of the owner labels the kit's ownership check compares
 * (provider, company, environment, as `leaseLabels` wrote them) and the 8 are random, one name per
 * capture. 28 characters of `[a-z0-9-]`: inside every vendor's name rules (E2B's alias
 * `^[a-z0-9-_]+$`, Daytona's image-name alphabet, boxd's DNS label). A name of any other form is
 * not a template (an operator's own snapshot or template in the same config field), except the
 * longer form the previous release wrote (below), still read so its templates stay usable.
 *
 * Why 64 bits of digest: a digest cannot be read back, so a template is accepted for whoever's
 * labels hash to the same 16 digits. The ids are the host's UUIDs, not chosen by a caller, so
 * reaching another owner's digest is a second preimage: ~2^64 environments made and hashed, per
 * target. Among N owners sharing one vendor account, an accidental match has probability about
 * N²/2^65 (10^-11 for 10,000 owners). Anyone holding the account key can reach every snapshot
 * anyway; the check guards the host's owners from each other, not from the key holder. The random
 * part keeps two captures of one owner apart (a vendor refuses, or — E2B — merges, a repeated name).
 */
const DIGEST_FORM = "pc-[0-9a-f]{16}-[0-9a-f]{8}";
const OWNED_NAME = new RegExp(`^${DIGEST_FORM}$`);
/** Where the owner digest sits in an owned name: after `pc-`, 16 hex digits. */
const digestOf = (name: string): string | undefined => (OWNED_NAME.test(name) ? name.slice(3, 19) : undefined);

/** The owner labels the digest covers, in this order (`\0` never occurs in a label, so the join is unambiguous). */
const OWNER_LABELS = ["paperclip-provider", "paperclip-company", "paperclip-environment"] as const;

/**
 * The previous release's daytona/e2b form: `paperclip-tpl-<n>-<company>-<m>-<environment>-<12 hex>`,
 * each id as written in a label, prefixed by its length (the provider was not in it: it is the
 * reader's). Only read, never made.
 */
const LEGACY_PREFIX = "paperclip-tpl-";

function ownerDigest(labels: Readonly<Record<string, string | undefined>>): string {
  const parts = OWNER_LABELS.map((key) => {
    const value = labels[key];
    if (!value) throw new Error(`the setup sandbox has no ${key} label, so its template could not name its owner`);
    return value;
  });
  return createHash("sha256").update(parts.join("\0")).digest("hex").slice(0, 16);
}

/** A fresh template name for the owner in `labels` (the setup sandbox's kit labels). */
export function ownedTemplateName(labels: Readonly<Record<string, string | undefined>>): string {
  return `pc-${ownerDigest(labels)}-${randomBytes(4).toString("hex")}`;
}

/** The company and environment a previous-release name spells out; null when it is not one. */
function legacyOwner(name: string): { company: string; environment: string } | null {
  if (!name.startsWith(LEGACY_PREFIX)) return null;
  let rest = name.slice(LEGACY_PREFIX.length);
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
  return { company, environment };
}

/** Whether `name` is a template name this kit gives (or the previous release gave). */
export const isOwnedTemplateName = (name: string): boolean => OWNED_NAME.test(name) || legacyOwner(name) !== null;

/** Whether `name` is in the form this kit gives now (the previous release's form not included). */
export const isDigestTemplateName = (name: string): boolean => OWNED_NAME.test(name);

/**
 * JSON-schema `pattern`s for a config field of template names, which the host's form checks before
 * the server does. The previous release's form is length-prefixed, which no regex spells exactly:
 * its pattern is the prefix, and the server checks the rest.
 */
export const TEMPLATE_NAME_PATTERN = {
  digest: `^${DIGEST_FORM}$`,
  digestOrLegacy: `^(?:${DIGEST_FORM}|${LEGACY_PREFIX}.+)$`,
} as const;

/**
 * The owner labels of a template name, for `TemplateDeclaration.labels`: `expected` (the owner the
 * kit is about to check) when the name is theirs; labels that differ from it when the name is
 * another owner's, so the kit refuses it with an ownership error rather than treating it as absent;
 * null for a name that is not a template.
 */
export function templateNameOwner(name: string, expected: Readonly<Record<string, string>>): Record<string, string> | null {
  const provider = expected["paperclip-provider"] ?? "";
  const digest = digestOf(name);
  if (digest) {
    if (digest === ownerDigest(expected)) return { ...expected };
    // Whose it is cannot be read from a digest: every owner label is reported as not matching.
    const other = `owner digest ${digest}`;
    return { "paperclip-provider": other, "paperclip-company": other, "paperclip-environment": other };
  }
  const legacy = legacyOwner(name);
  if (!legacy) return null;
  return { "paperclip-provider": provider, "paperclip-company": legacy.company, "paperclip-environment": legacy.environment };
}
