/**
 * Sandbox ids: chosen by the caller (a vendor's sandbox name, a lease id) or generated. An id is a
 * directory name, so it is validated strictly; everything length-limited (Unix socket paths,
 * cgroup names) uses a short hash of it instead, so any valid id fits.
 */
import { createHash, randomBytes } from "node:crypto";
import { SandboxInputError } from "./errors.js";

export const SANDBOX_ID_MAX = 253;
const SANDBOX_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;
export const SANDBOX_ID_RULE = `1-${SANDBOX_ID_MAX} characters from A-Z a-z 0-9 . _ -, starting with a letter or digit`;

export function isSandboxId(value: unknown): value is string {
  return typeof value === "string" && SANDBOX_ID_PATTERN.test(value);
}

/** Throws a SandboxInputError naming the rule (and a preview of the bad id) unless `value` is a valid id. */
export function checkSandboxId(value: unknown, field = "id"): string {
  if (isSandboxId(value)) return value;
  const shown = typeof value === "string" ? JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value) : typeof value;
  throw new SandboxInputError(`${field} ${shown} is not a valid sandbox id: use ${SANDBOX_ID_RULE}`);
}

/** `sbx-` and 16 characters of base36 from 80 random bits. */
export function newSandboxId(prefix = "sbx-"): string {
  let value = BigInt(`0x${randomBytes(10).toString("hex")}`);
  let id = "";
  for (let i = 0; i < 16; i += 1) {
    id += "0123456789abcdefghijklmnopqrstuvwxyz"[Number(value % 36n)];
    value /= 36n;
  }
  return `${prefix}${id}`;
}

/** 16 hex characters naming the id where length is limited (socket directory, cgroup). */
export function shortName(id: string): string {
  return createHash("sha256").update(id).digest("hex").slice(0, 16);
}
