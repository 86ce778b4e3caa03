import { createHash, timingSafeEqual } from "node:crypto";

/** Why a presented credential was refused, or who it belongs to. */
export type CredentialCheck<P> = { ok: true; principal: P } | { ok: false; reason: "missing" | "invalid" | "forbidden" };

export interface CredentialRule<P = string> {
  /**
   * Known credentials: a list (the principal is the credential itself) or a map to principals
   * (a team, a token's scopes). Compared in constant time.
   */
  accept: readonly string[] | ReadonlyMap<string, P> | Record<string, P>;
  /** After the credential is known: may this principal do this? `false` means 403. */
  authorize?: (principal: P) => boolean;
}

/** Checks one presented credential against a rule; shared by the HTTP and gRPC helpers. */
export function checkCredential<P = string>(presented: string | undefined, rule: CredentialRule<P>): CredentialCheck<P> {
  if (presented === undefined || presented === "") return { ok: false, reason: "missing" };
  const entries: Array<[string, P]> = Array.isArray(rule.accept)
    ? (rule.accept as string[]).map((credential) => [credential, credential as unknown as P])
    : rule.accept instanceof Map
      ? [...(rule.accept as ReadonlyMap<string, P>).entries()]
      : Object.entries(rule.accept as Record<string, P>);
  const digest = sha256(presented);
  let principal: P | undefined;
  let found = false;
  for (const [credential, owner] of entries) {
    // Every candidate is compared, so timing says nothing about which one nearly matched.
    if (timingSafeEqual(digest, sha256(credential)) && !found) {
      found = true;
      principal = owner;
    }
  }
  if (!found) return { ok: false, reason: "invalid" };
  if (rule.authorize && !rule.authorize(principal as P)) return { ok: false, reason: "forbidden" };
  return { ok: true, principal: principal as P };
}

const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest();
