/** JSON answers and the bridge's one error shape: `{error, message, details?}`. */

export const API_PREFIX = "/api/paperclip-sandbox/v1";

export class BridgeError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "BridgeError";
  }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

export function errorResponse(error: unknown): Response {
  if (error instanceof BridgeError) return json(error.status, { error: error.code, message: error.message, details: error.details });
  return json(500, { error: "internal_error", message: error instanceof Error ? error.message : String(error) });
}

/** The request's JSON body as an object; a body that is not a JSON object is a 400. */
export async function readBody(request: Request): Promise<Record<string, unknown>> {
  const text = await request.text();
  if (text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BridgeError(400, "invalid_request", "The request body is not valid JSON.");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new BridgeError(400, "invalid_request", "The request body must be a JSON object.");
  return parsed as Record<string, unknown>;
}

export const str = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value.trim() : undefined);
export const bool = (value: unknown): boolean => value === true;
export function int(value: unknown, fallback: number): number {
  const n = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : Number.NaN;
  return Number.isFinite(n) && n > 0 ? Math.trunc(n) : fallback;
}
