import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

interface TokenClaims {
  /** "auth" for the control plane's token, "router" for a task command router token. */
  typ: "auth" | "router";
  /** The token id (auth) or the task id (router). */
  sub: string;
  /** Expiry, epoch seconds (the SDK reads it to schedule refreshes). */
  exp: number;
  iat: number;
}

/** JWT-shaped tokens (HS256 with a key that never leaves the emulator), so the SDK can read `exp`. */
export interface TokenIssuer {
  issue(typ: TokenClaims["typ"], sub: string, ttlSeconds: number): string;
  /** The claims of a token this issuer made and that has not expired; null otherwise. */
  verify(token: string | undefined, typ: TokenClaims["typ"]): TokenClaims | null;
}

const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");

export function createTokenIssuer(now: () => number = Date.now): TokenIssuer {
  const key = randomBytes(32);
  const sign = (input: string) => createHmac("sha256", key).update(input).digest();
  return {
    issue(typ, sub, ttlSeconds) {
      const iat = Math.floor(now() / 1000);
      const claims: TokenClaims = { typ, sub, iat, exp: iat + ttlSeconds };
      const body = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
      return `${body}.${sign(body).toString("base64url")}`;
    },
    verify(token, typ) {
      if (!token) return null;
      const parts = token.split(".");
      if (parts.length !== 3) return null;
      const [header, payload, signature] = parts as [string, string, string];
      const expected = sign(`${header}.${payload}`);
      const given = Buffer.from(signature, "base64url");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      let claims: TokenClaims;
      try {
        claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as TokenClaims;
      } catch {
        return null;
      }
      if (claims.typ !== typ || typeof claims.exp !== "number" || claims.exp * 1000 <= now()) return null;
      return claims;
    },
  };
}
