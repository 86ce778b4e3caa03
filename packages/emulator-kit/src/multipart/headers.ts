/** `form-data; name="a"; filename="b"` → { value: "form-data", params: { name: "a", filename: "b" } } */
export function parseHeaderParams(header: string): { value: string; params: Record<string, string> } {
  const params: Record<string, string> = {};
  let index = header.indexOf(";");
  const value = (index < 0 ? header : header.slice(0, index)).trim().toLowerCase();
  while (index >= 0 && index < header.length) {
    index++; // past ';'
    while (header[index] === " " || header[index] === "\t") index++;
    const eq = header.indexOf("=", index);
    if (eq < 0) break;
    const name = header.slice(index, eq).trim().toLowerCase();
    index = eq + 1;
    let paramValue = "";
    if (header[index] === '"') {
      index++;
      while (index < header.length && header[index] !== '"') {
        if (header[index] === "\\" && index + 1 < header.length) index++;
        paramValue += header[index];
        index++;
      }
      index = header.indexOf(";", index);
    } else {
      const end = header.indexOf(";", index);
      paramValue = (end < 0 ? header.slice(index) : header.slice(index, end)).trim();
      index = end;
    }
    if (name !== "") params[name] = paramValue;
  }
  // RFC 5987 `filename*=UTF-8''%E2%82%AC.txt` wins over `filename`.
  for (const [name, raw] of Object.entries(params)) {
    if (!name.endsWith("*")) continue;
    const decoded = decodeExtendedValue(raw);
    if (decoded !== undefined) params[name.slice(0, -1)] = decoded;
  }
  return { value, params };
}

function decodeExtendedValue(raw: string): string | undefined {
  const match = /^([A-Za-z0-9!#$%&+^_`{}~-]+)'[^']*'(.*)$/.exec(raw);
  if (!match) return undefined;
  const charset = match[1]!.toLowerCase();
  try {
    const bytes = Buffer.from(decodeURIComponentBytes(match[2]!));
    return charset === "utf-8" || charset === "utf8" ? bytes.toString("utf8") : bytes.toString("latin1");
  } catch {
    return undefined;
  }
}

function decodeURIComponentBytes(text: string): number[] {
  const out: number[] = [];
  for (let index = 0; index < text.length; index++) {
    if (text[index] === "%" && /^[0-9A-Fa-f]{2}$/.test(text.slice(index + 1, index + 3))) {
      out.push(parseInt(text.slice(index + 1, index + 3), 16));
      index += 2;
    } else out.push(...Buffer.from(text[index]!, "utf8"));
  }
  return out;
}

/** The boundary of a `multipart/*` Content-Type, or undefined. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  if (!contentType) return undefined;
  const { value, params } = parseHeaderParams(contentType);
  if (!value.startsWith("multipart/")) return undefined;
  const boundary = params.boundary;
  return boundary && boundary.length <= 70 ? boundary : undefined;
}
