import { fingerprintOf, parseSshsig, sshsigSign, sshsigVerify, type Ed25519Key, type ParsedSshsig } from "./sshsig.js";

/**
 * exe.dev API tokens: `exe0.<base64url(permissions JSON)>.<base64url(SSHSIG blob)>`, the JSON
 * signed by a key registered with the account in namespace `v0@exe.dev`. Parsing follows exe.dev's
 * `sshkey.ParseToken` (the same strictness and messages); verification looks the key up by the
 * fingerprint of the key embedded in the signature.
 */

const TOKEN_PREFIX = "exe0.";
const MAX_TOKEN_BYTES = 8 * 1024;
const MIN_UNIX = 946_684_800;
const MAX_UNIX = 4_102_444_800;

/** The commands a token without `cmds` may run (exe.dev's DefaultTokenCmds). */
export const DEFAULT_TOKEN_CMDS = ["help", "ls", "new", "whoami", "ssh-key list", "share show"];

export interface TokenPermissions {
  exp?: number;
  nbf?: number;
  cmds?: string[];
  ctx?: unknown;
}

export interface ParsedToken {
  fingerprint: string;
  payload: Buffer;
  permissions: TokenPermissions;
  signature: ParsedSshsig;
}

export class TokenError extends Error {}

export function parseToken(token: string): ParsedToken {
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) throw new TokenError("invalid token: exceeds maximum size");
  if (!token.startsWith(TOKEN_PREFIX)) throw new TokenError("invalid token format: missing exe0. prefix");
  const rest = token.slice(TOKEN_PREFIX.length);
  const dot = rest.indexOf(".");
  if (dot < 0) throw new TokenError("invalid token format: expected exe0.<payload>.<sigblob>");
  const payloadText = rest.slice(0, dot);
  const sigText = rest.slice(dot + 1);
  if (!/^[A-Za-z0-9_-]*$/.test(payloadText)) throw new TokenError("invalid token: payload is not valid base64url");
  const payload = Buffer.from(payloadText, "base64url");
  const text = payload.toString("utf8");
  if (text !== text.trim()) throw new TokenError("invalid token: payload must not have leading or trailing whitespace");
  if (/[\r\n]/.test(text)) throw new TokenError("invalid token: payload must not contain newlines");
  if (text.includes("\0")) throw new TokenError("invalid token: payload must not contain null bytes");
  if (!text.startsWith("{")) throw new TokenError("invalid token: payload must be a JSON object");
  const permissions = parsePermissions(text);
  if (!/^[A-Za-z0-9_-]*$/.test(sigText)) throw new TokenError("invalid token: signature is not valid base64url");
  let signature: ParsedSshsig;
  try {
    signature = parseSshsig(Buffer.from(sigText, "base64url"));
  } catch {
    throw new TokenError("invalid token: malformed signature");
  }
  return { fingerprint: fingerprintOf(signature.publicKeyBlob), payload, permissions, signature };
}

function parsePermissions(text: string): TokenPermissions {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new TokenError("invalid token: invalid JSON");
  }
  if (!value || typeof value !== "object" || Array.isArray(value) || hasDuplicateKeys(text)) throw new TokenError("invalid token: invalid JSON");
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) if (!["exp", "nbf", "cmds", "ctx"].includes(key)) throw new TokenError("invalid token: invalid JSON");
  const permissions: TokenPermissions = {};
  for (const key of ["exp", "nbf"] as const) {
    if (record[key] === undefined) continue;
    const raw = rawNumber(text, key);
    if (raw === undefined || !/^-?(0|[1-9]\d*)$/.test(raw)) throw new TokenError("invalid token: invalid JSON");
    const n = Number(raw);
    if (n < MIN_UNIX || n > MAX_UNIX) throw new TokenError(`invalid token: ${key} out of valid range`);
    permissions[key] = n;
  }
  if (record.cmds !== undefined) {
    if (!Array.isArray(record.cmds) || !record.cmds.every((c) => typeof c === "string")) throw new TokenError("invalid token: invalid JSON");
    if (record.cmds.some((c) => c === "")) throw new TokenError("invalid token: cmds elements must be non-empty strings");
    permissions.cmds = record.cmds as string[];
  }
  if (record.ctx !== undefined) permissions.ctx = record.ctx;
  return permissions;
}

/** The literal text of a top-level number (JSON.parse would accept 1e9 or 1.0, which exe.dev refuses). */
function rawNumber(text: string, key: string): string | undefined {
  return new RegExp(`"${key}"\\s*:\\s*([-+0-9.eE]+)`).exec(text)?.[1];
}

/** Go's json/v2 refuses duplicate keys at any level; a small scanner finds them. */
function hasDuplicateKeys(text: string): boolean {
  const stack: Array<Set<string> | null> = [];
  let i = 0;
  let expectKey = false;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "{") {
      stack.push(new Set());
      expectKey = true;
      i++;
    } else if (c === "[") {
      stack.push(null);
      i++;
    } else if (c === "}" || c === "]") {
      stack.pop();
      i++;
    } else if (c === ",") {
      expectKey = stack[stack.length - 1] instanceof Set;
      i++;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const str = text.slice(i, j + 1);
      const keys = stack[stack.length - 1];
      if (expectKey && keys instanceof Set) {
        const key = JSON.parse(str) as string;
        if (keys.has(key)) return true;
        keys.add(key);
        expectKey = false;
      }
      i = j + 1;
    } else i++;
  }
  return false;
}

export function checkClaims(permissions: TokenPermissions, nowMs: number): void {
  const now = Math.floor(nowMs / 1000);
  if (permissions.exp !== undefined && permissions.exp < now) throw new TokenError("invalid token: token has expired");
  if (permissions.nbf !== undefined && permissions.nbf > now) throw new TokenError("invalid token: token is not yet valid");
}

/** Verifies a parsed token against the account's keys; a generic message for every key problem, as exe.dev. */
export function verifyToken(parsed: ParsedToken, keys: ReadonlyMap<string, Ed25519Key>, namespace: string): Ed25519Key {
  const key = keys.get(parsed.fingerprint);
  if (!key || !sshsigVerify(parsed.signature, key, namespace, parsed.payload)) throw new TokenError("invalid token");
  return key;
}

/** Makes a token the documented way (compact permissions JSON, signed in `namespace`). */
export function mintToken(key: Ed25519Key, permissions: TokenPermissions = {}, namespace = "v0@exe.dev"): string {
  const payload = Buffer.from(JSON.stringify(permissions));
  return `${TOKEN_PREFIX}${payload.toString("base64url")}.${sshsigSign(key, namespace, payload).toString("base64url")}`;
}

/** Whether a token's commands include `command` (exact names; `ssh-key` does not grant `ssh-key list`). */
export function tokenAllows(cmds: readonly string[] | undefined, command: string): boolean {
  return (cmds ?? DEFAULT_TOKEN_CMDS).includes(command);
}
