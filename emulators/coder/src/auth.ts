/**
 * Coder's session-token check (`httpmw.APIKeyFromRequest`): the token comes from the
 * `coder_session_token` cookie, the query parameter of that name, the `Coder-Session-Token` header
 * or a Bearer `Authorization`; it must be `<10-char id>-<22-char secret>`; a missing or wrong one
 * is 401 with Coder's sentences.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { coderError } from "./errors.js";

export const SESSION_COOKIE = "coder_session_token";
const SESSION_HEADER = "coder-session-token";
const SIGNED_OUT = "You are signed out or your session has expired. Please sign in again to continue.";
const ALPHANUMERIC = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** A fresh token in Coder's shape. */
export function newSessionToken(): string {
  const pick = (length: number) => [...randomBytes(length)].map((byte) => ALPHANUMERIC[byte % ALPHANUMERIC.length]).join("");
  return `${pick(10)}-${pick(22)}`;
}

/** The cookies of a request, by name (the first value wins). */
function cookiesOf(headers: IncomingHttpHeaders): Map<string, string> {
  const jar = new Map<string, string>();
  for (const part of String(headers.cookie ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name && !jar.has(name)) jar.set(name, part.slice(eq + 1).trim());
  }
  return jar;
}

/** The token a request carries, looked up where Coder looks. */
function tokenOf(headers: IncomingHttpHeaders, query: URLSearchParams): string | undefined {
  const cookie = cookiesOf(headers).get(SESSION_COOKIE);
  if (cookie) return cookie;
  const fromQuery = query.get(SESSION_COOKIE);
  if (fromQuery) return fromQuery;
  const header = headers[SESSION_HEADER];
  if (typeof header === "string" && header) return header;
  const bearer = /^Bearer\s+(\S+)$/i.exec(String(headers.authorization ?? ""));
  return bearer?.[1];
}

/** Throws Coder's 401 unless the request carries `expected`. */
export function requireSession(headers: IncomingHttpHeaders, query: URLSearchParams, expected: string): void {
  const token = tokenOf(headers, query);
  if (!token) throw coderError(401, SIGNED_OUT, { detail: `Cookie "${SESSION_COOKIE}" or query parameter must be provided.` });
  const parts = token.split("-");
  if (parts.length !== 2) throw coderError(401, SIGNED_OUT, { detail: `Invalid API key format: incorrect amount of API key parts, expected 2 got ${parts.length}` });
  if (parts[0]!.length !== 10) throw coderError(401, SIGNED_OUT, { detail: `Invalid API key format: invalid API key ID length, expected 10 got ${parts[0]!.length}` });
  if (parts[1]!.length !== 22) throw coderError(401, SIGNED_OUT, { detail: `Invalid API key format: invalid API key secret length, expected 22 got ${parts[1]!.length}` });
  const [id, secret] = expected.split("-");
  if (parts[0] !== id) throw coderError(401, SIGNED_OUT, { detail: "API key is invalid." });
  const given = Buffer.from(parts[1]!);
  const wanted = Buffer.from(secret ?? "");
  if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) throw coderError(401, SIGNED_OUT, { detail: "API key secret is invalid." });
}

/** The request headers an app receives: Coder's own cookies and token headers stripped. */
export function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name === SESSION_HEADER || name === "host") continue;
    if (name === "authorization" && /^Bearer\s/i.test(String(value))) continue;
    if (name === "cookie") {
      const kept = String(value)
        .split(";")
        .map((part) => part.trim())
        .filter((part) => part && !/^coder_[a-z_]*token=/i.test(part));
      if (kept.length > 0) out.cookie = kept.join("; ");
      continue;
    }
    out[name] = value;
  }
  return out;
}
