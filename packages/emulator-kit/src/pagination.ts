import { HttpError } from "./http/errors.js";

export interface PageRequest {
  /** The opaque cursor from the previous page (absent or '' for the first). */
  cursor?: string | null;
  limit?: number | null;
}

export interface PageOptions<T> {
  /** A stable, unique sort key for each item (an id, `createdAt|id`). Items are paged in key order. */
  key: (item: T) => string;
  defaultLimit?: number;
  maxLimit?: number;
}

export interface Page<T> {
  items: T[];
  /** Cursor for the next page; `undefined` on the last page. */
  nextCursor: string | undefined;
}

/**
 * Keyset pagination: the cursor names the last key served, so items created or deleted between
 * pages neither repeat nor shift the window. Cursors are opaque (base64url JSON) and validated.
 */
export function paginate<T>(items: readonly T[], request: PageRequest, options: PageOptions<T>): Page<T> {
  const defaultLimit = options.defaultLimit ?? 100;
  const maxLimit = options.maxLimit ?? 1000;
  const limit = request.limit ?? defaultLimit;
  if (!(Number.isInteger(limit) && limit >= 1 && limit <= maxLimit)) {
    throw new HttpError(400, `limit: must be an integer within 1..${maxLimit} (got ${limit})`, { code: "invalid_argument" });
  }
  const after = request.cursor ? decodeCursor(request.cursor) : undefined;
  const sorted = [...items].sort((a, b) => compare(options.key(a), options.key(b)));
  const start = after === undefined ? 0 : sorted.findIndex((item) => compare(options.key(item), after) > 0);
  const window = start < 0 ? [] : sorted.slice(start, start + limit);
  const last = window[window.length - 1];
  const more = start >= 0 && start + limit < sorted.length;
  return { items: window, nextCursor: more && last !== undefined ? encodeCursor(options.key(last)) : undefined };
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function encodeCursor(afterKey: string): string {
  return Buffer.from(JSON.stringify({ after: afterKey }), "utf8").toString("base64url");
}

export function decodeCursor(cursor: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { after?: unknown };
    if (typeof parsed.after === "string") return parsed.after;
  } catch {
    // falls through to the error below
  }
  throw new HttpError(400, "cursor: not a cursor this server issued", { code: "invalid_argument" });
}
