import { createHash, randomBytes } from "node:crypto";
import { defineLeaseIdCodec } from "@paperclip-sandbox/kit";
import type { KubernetesConfig } from "./config.js";

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/** A lower-case ULID (26 characters: 48-bit time, 80 random bits): sortable, a valid DNS label part. */
export function ulid(now: number = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(10);
  let bits = 0n;
  for (const b of bytes) bits = (bits << 8n) | BigInt(b);
  let random = "";
  for (let i = 0; i < 16; i++) {
    random = CROCKFORD[Number(bits & 31n)]! + random;
    bits >>= 5n;
  }
  return time + random;
}

export const workloadName = () => `pc-${ulid()}`;

/** A name within `max` characters: past it, the middle is replaced by 8 hex digits of its hash. */
export function shortenName(name: string, max = 253): string {
  if (name.length <= max) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8);
  const keep = max - hash.length - 2;
  const head = Math.ceil(keep / 2);
  return `${name.slice(0, head).replace(/[-.]+$/, "")}-${hash}-${name.slice(name.length - (keep - head)).replace(/^[-.]+/, "")}`;
}

/** The company's tenant namespace: `<prefix><slug>`, the slug from config or the company id. */
export function tenantNamespace(config: KubernetesConfig, companyId: string): string {
  const slug =
    config.companySlug ??
    companyId
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 63 - config.namespacePrefix.length)
      .replace(/-+$/g, "");
  const name = `${config.namespacePrefix}${slug || createHash("sha256").update(companyId).digest("hex").slice(0, 12)}`;
  return name.replace(/^-+/, "");
}

export type WorkloadKind = "sandbox" | "job";

export interface WorkloadRef {
  namespace: string;
  kind: WorkloadKind;
  name: string;
}

const LABEL = "[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?";

/** `k8s-<namespace>/<sandbox|job>/<pc-ulid>`. */
export const leaseIds = defineLeaseIdCodec<WorkloadRef>({
  vendor: "kubernetes",
  prefix: "k8s-",
  pattern: new RegExp(`(${LABEL})/(sandbox|job)/(pc-[0-9a-z]{26})`),
  rule: "k8s-<namespace>/<sandbox|job>/pc-<ulid>",
  encode: ({ namespace, kind, name }) => `${namespace}/${kind}/${name}`,
  decode: (_body, m) => ({ namespace: m[1]!, kind: m[2] as WorkloadKind, name: m[3]! }),
});
