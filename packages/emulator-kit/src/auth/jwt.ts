import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The claims every token carries besides the emulator's own. */
export interface JwtTimes {
  /** Issued at, epoch seconds. */
  iat: number;
  /** Expiry, epoch seconds (SDKs read it to schedule refreshes). */
  exp: number;
}

export interface IssuedJwt {
  token: string;
  /** `exp`, epoch seconds. */
  expiresAt: number;
}

/**
 * JWT-shaped bearer tokens for emulators whose vendor hands out short-lived JWTs (a token exchange):
 * HS256 with a key that never leaves the emulator, so clients can read `exp` and the emulator can
 * check the signature and the expiry. `now` is injectable for tests of expiry and refresh.
 */
export interface JwtIssuer<C extends object> {
  issue(claims: C, ttlSeconds: number): IssuedJwt;
  /** The claims of a token this issuer made that has not expired (a `Bearer ` prefix is accepted); null otherwise. */
  verify(token: string | undefined): (C & JwtTimes) | null;
}

const HEADER = Buffer.from(JSON.stringify({ alg: "HS256", typ: "JWT" })).toString("base64url");

export function createJwtIssuer<C extends object>(now: () => number = Date.now): JwtIssuer<C> {
  const key = randomBytes(32);
  const sign = (input: string) => createHmac("sha256", key).update(input).digest();
  return {
    issue(claims, ttlSeconds) {
      if (!(ttlSeconds > 0)) throw new TypeError("ttlSeconds: must be greater than 0");
      const at = now();
      const iat = Math.floor(at / 1000);
      // Whole seconds, rounded up: a token lives at least `ttlSeconds`.
      const exp = Math.ceil((at + ttlSeconds * 1000) / 1000);
      const body = `${HEADER}.${Buffer.from(JSON.stringify({ ...claims, iat, exp })).toString("base64url")}`;
      return { token: `${body}.${sign(body).toString("base64url")}`, expiresAt: exp };
    },
    verify(raw) {
      if (!raw) return null;
      const token = raw.replace(/^Bearer[ \t]+/i, "").trim();
      const parts = token.split(".");
      if (parts.length !== 3) return null;
      const [header, payload, signature] = parts as [string, string, string];
      const expected = sign(`${header}.${payload}`);
      const given = Buffer.from(signature, "base64url");
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
      let claims: C & JwtTimes;
      try {
        claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as C & JwtTimes;
      } catch {
        return null;
      }
      if (typeof claims.exp !== "number" || claims.exp * 1000 <= now()) return null;
      return claims;
    },
  };
}
