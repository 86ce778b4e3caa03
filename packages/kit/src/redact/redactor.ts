export const REDACTED = "[REDACTED]";
/** Shorter values would redact ordinary words; providers should never have secrets this short. */
export const MIN_SECRET_LENGTH = 4;
/** An encoded fragment shorter than this could match unrelated base64 by chance. */
const MIN_ENCODED_FRAGMENT = 6;

export type Redactor = (text: string) => string;

/**
 * Replaces each secret with [REDACTED]: its plain and URL-encoded forms, and any base64 token that
 * contains it at any byte alignment. The alignment fragments cover `base64(secret)` as well as
 * Basic-auth headers, `base64(user:secret)` and `base64(secret:...)`, without knowing the user name;
 * the whole base64 token is replaced, so no partial encoding is left behind.
 */
export function createRedactor(secrets: Iterable<string>): Redactor {
  const values = [...new Set([...secrets].filter((s) => typeof s === "string" && s.length >= MIN_SECRET_LENGTH))];
  if (values.length === 0) return (text) => text;
  const plain = [...new Set(values.flatMap((s) => [s, encodeURIComponent(s)]))].sort((a, b) => b.length - a.length);
  const plainPattern = new RegExp(plain.map(escapeRegExp).join("|"), "g");
  const fragments = [...new Set(values.flatMap(base64Fragments))];
  const tokenPattern = /[A-Za-z0-9+/_-]{6,}={0,2}/g;
  return (text) => {
    const withoutPlain = text.replace(plainPattern, REDACTED);
    if (fragments.length === 0) return withoutPlain;
    return withoutPlain.replace(tokenPattern, (token) => (fragments.some((f) => token.includes(f)) ? REDACTED : token));
  };
}

/** The part of base64(prefix + secret + suffix) that depends only on the secret, for each of the 3 alignments. */
function base64Fragments(secret: string): string[] {
  const bytes = Buffer.from(secret, "utf8");
  const fragments: string[] = [];
  for (let offset = 0; offset < 3; offset += 1) {
    const padded = Buffer.concat([Buffer.alloc(offset), bytes]);
    const encoded = padded.toString("base64");
    const start = offset === 0 ? 0 : 4; // the first group mixes in unknown prefix bytes
    const end = Math.floor(padded.length / 3) * 4; // the last partial group mixes in unknown suffix bytes
    const fragment = encoded.slice(start, end);
    if (fragment.length >= MIN_ENCODED_FRAGMENT) {
      fragments.push(fragment, fragment.replace(/\+/g, "-").replace(/\//g, "_"));
    }
  }
  return fragments;
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
