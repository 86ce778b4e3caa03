import { createHash, randomBytes } from "node:crypto";
import { LeaseOwnershipError, type LeaseOwner, type OwnershipMismatch } from "./ownership.js";

/** DNS label: what boxd (and any vendor using names in hostnames) accepts. */
export const LEASE_NAME_MAX = 63;

// provider, company, environment, run hashes and a nonce, in hex: 6+10+10+10+8 characters.
const PARTS = [
  ["provider", 6],
  ["company", 10],
  ["environment", 10],
  ["run", 10],
  ["nonce", 8],
] as const;

export interface LeaseNameParts {
  provider: string;
  company: string;
  environment: string;
  run: string;
  nonce: string;
}

export interface LeaseNameOptions {
  /** Starts every name, so listing by prefix finds ours: a letter, then up to 11 of `[a-z0-9]` (default "pc"). */
  prefix?: string;
  /** The vendor's name limit (default 63, a DNS label). */
  maxLength?: number;
}

/** The hash of one id as it appears in a name. */
export function leaseNameHash(kind: "provider" | "company" | "environment" | "run", id: string): string {
  const length = PARTS.find(([name]) => name === kind)![1];
  return createHash("sha256").update(`paperclip-sandbox:${kind}:${id}`).digest("hex").slice(0, length);
}

/**
 * A name for vendors without labels (boxd): `<prefix>-<provider>-<company>-<environment>-<run>-<nonce>`,
 * each a hex hash fragment, lowercase `[a-z0-9-]`, at most 63 characters. It cannot be turned back
 * into the ids, but `parseLeaseName` reads the hashes and `assertLeaseNameOwnedBy` compares them.
 */
export function encodeLeaseName(input: LeaseOwner & { runId: string }, options: LeaseNameOptions & { nonce?: string } = {}): string {
  const prefix = checkPrefix(options.prefix ?? "pc");
  const nonce = options.nonce ?? randomBytes(4).toString("hex");
  if (!/^[0-9a-f]{8}$/.test(nonce)) throw new TypeError(`lease name nonce: expected 8 hex digits, got ${JSON.stringify(nonce)}`);
  const name = [
    prefix,
    leaseNameHash("provider", input.driverKey),
    leaseNameHash("company", input.companyId),
    leaseNameHash("environment", input.environmentId),
    leaseNameHash("run", input.runId),
    nonce,
  ].join("-");
  const max = options.maxLength ?? LEASE_NAME_MAX;
  if (name.length > max) throw new RangeError(`lease name: ${name.length} characters do not fit the vendor's limit of ${max} (use a shorter prefix)`);
  return name;
}

/** The hash fragments of a name `encodeLeaseName` made with this prefix; undefined for any other name. */
export function parseLeaseName(name: string, options: Pick<LeaseNameOptions, "prefix"> = {}): LeaseNameParts | undefined {
  const prefix = checkPrefix(options.prefix ?? "pc");
  const pattern = new RegExp(`^${prefix}-${PARTS.map(([, length]) => `([0-9a-f]{${length}})`).join("-")}$`);
  const match = pattern.exec(name);
  if (!match) return undefined;
  const [, provider, company, environment, run, nonce] = match as unknown as string[];
  return { provider: provider!, company: company!, environment: environment!, run: run!, nonce: nonce! };
}

/** Throws `LeaseOwnershipError` unless the name was made for this provider, company and environment. */
export function assertLeaseNameOwnedBy(name: string, expected: LeaseOwner, options: Pick<LeaseNameOptions, "prefix"> = {}): void {
  const parts = parseLeaseName(name, options);
  if (!parts) throw new LeaseOwnershipError(`"${name}"`, [{ label: "name", expected: `a ${options.prefix ?? "pc"}- lease name`, actual: name }]);
  const mismatches: OwnershipMismatch[] = [];
  const compare = (kind: "provider" | "company" | "environment", id: string) => {
    const wanted = leaseNameHash(kind, id);
    if (parts[kind] !== wanted) mismatches.push({ label: `name ${kind} hash`, expected: wanted, actual: parts[kind] });
  };
  compare("provider", expected.driverKey);
  compare("company", expected.companyId);
  compare("environment", expected.environmentId);
  if (mismatches.length > 0) throw new LeaseOwnershipError(`"${name}"`, mismatches);
}

function checkPrefix(prefix: string): string {
  if (!/^[a-z][a-z0-9]{0,11}$/.test(prefix)) throw new TypeError(`lease name prefix: expected a letter then up to 11 of a-z 0-9, got ${JSON.stringify(prefix)}`);
  return prefix;
}
