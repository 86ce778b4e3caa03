import { randomBytes } from "node:crypto";
import { defineLeaseIdCodec } from "@paperclip-sandbox/kit";

/**
 * A lease is one Modal sandbox (its id; the SDK tells V1 from V2 by the id's shape), or, for a lease
 * kept by snapshots, a sandbox name: each resume starts a new sandbox under the same name, so the
 * lease id Paperclip stores stays the same across snapshot cycles.
 */
export type ModalLeaseRef = { kind: "sandbox"; sandboxId: string } | { kind: "named"; name: string };

const SNAPSHOT_LEASE_PREFIX = "snapshot:";

export const modalLeaseIds = defineLeaseIdCodec<ModalLeaseRef>({
  vendor: "modal",
  pattern: /snapshot:(pc-[a-f0-9]{20})|([A-Za-z0-9_-]{1,128})/,
  rule: 'a Modal sandbox id (1 to 128 of A-Z a-z 0-9 _ -), or "snapshot:pc-" and 20 hex digits for a lease kept by snapshots',
  encode: (ref) => (ref.kind === "sandbox" ? ref.sandboxId : `${SNAPSHOT_LEASE_PREFIX}${ref.name}`),
  decode: (_body, match) => (match[1] ? { kind: "named", name: match[1] } : { kind: "sandbox", sandboxId: match[2]! }),
});

/** A fresh sandbox name for a lease kept by snapshots (Modal names are unique among an app's running sandboxes). */
export function newLeaseName(): string {
  return `pc-${randomBytes(10).toString("hex")}`;
}
