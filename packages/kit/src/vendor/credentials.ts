import { isSecretLookingKey } from "../redact/index.js";

/** What `new Headers()` accepts (HeadersInit is a DOM-lib name). */
export type HeadersInput = ConstructorParameters<typeof Headers>[0];

const AUTH_HEADERS = new Set(["authorization", "proxy-authorization", "cookie", "set-cookie"]);

export interface SeparatedCredentials {
  /** The URL without `user:password@` (fetch refuses such URLs, and its error would print them). */
  url: URL;
  headers: Headers;
  /** Every credential value found, to register with the redactor. */
  secrets: string[];
}

/**
 * Finds the credentials in a request so none can reach an error or a log line: auth headers (and
 * the token inside `Bearer …` / `Basic …`), secret-named headers and query parameters, and URL
 * credentials, which become a Basic `Authorization` header.
 */
export function separateCredentials(rawUrl: string | URL, rawHeaders: HeadersInput | undefined): SeparatedCredentials {
  const url = new URL(rawUrl);
  const headers = new Headers(rawHeaders);
  const secrets: string[] = [];
  if (url.username || url.password) {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    secrets.push(user, password, url.username, url.password);
    if (!headers.has("authorization")) headers.set("authorization", `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`);
    url.username = "";
    url.password = "";
  }
  for (const [name, value] of url.searchParams) if (isSecretLookingKey(name) || name === "key" || name === "sig") secrets.push(value);
  headers.forEach((value, name) => {
    if (!AUTH_HEADERS.has(name) && !isSecretLookingKey(name)) return;
    secrets.push(value, ...credentialParts(value));
  });
  return { url, headers, secrets: secrets.filter((s) => s !== "") };
}

/** `Bearer abc` → abc; `Basic base64(user:pw)` → the pair and each half. */
function credentialParts(value: string): string[] {
  const match = /^\s*([A-Za-z-]+)\s+(\S+)\s*$/.exec(value);
  if (!match) return [];
  const [, scheme, token] = match as unknown as [string, string, string];
  if (scheme.toLowerCase() !== "basic") return [token];
  const decoded = Buffer.from(token, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1 ? [token, decoded] : [token, decoded, decoded.slice(0, colon), decoded.slice(colon + 1)];
}
