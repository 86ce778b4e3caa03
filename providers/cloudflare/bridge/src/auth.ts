/**
 * Bearer auth on every route. Both tokens are hashed (SHA-256) and the digests compared with an XOR
 * loop over all 32 bytes, so the comparison takes the same time wherever the tokens differ and
 * whatever their lengths. An unset or blank BRIDGE_AUTH_TOKEN refuses everything.
 */
const encoder = new TextEncoder();

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

async function tokensMatch(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(given), digest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export async function isAuthorized(request: Request, expected: string | undefined): Promise<boolean> {
  const configured = expected?.trim() ?? "";
  const header = request.headers.get("authorization") ?? "";
  const match = /^bearer\s+(.+)$/i.exec(header.trim());
  const given = match?.[1]?.trim() ?? "";
  // Always hash and compare, so a missing header costs what a wrong one does.
  const same = await tokensMatch(given, configured);
  return configured !== "" && given !== "" && same;
}
