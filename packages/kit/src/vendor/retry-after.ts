/**
 * `Retry-After` in milliseconds: delay-seconds (`120`) or an HTTP-date (`Wed, 21 Oct 2026 07:28:00
 * GMT`, counted from `now`; a past date is 0). Anything else is ignored (undefined).
 */
export function parseRetryAfter(value: string | null | undefined, now: number = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  if (!/[a-z]/i.test(text)) return undefined; // "1.5", "-3": not a valid form; Date.parse would accept some
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
