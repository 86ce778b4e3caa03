import { createHash } from "node:crypto";
import { createVendorCall, ProviderApiError, vendorFetch } from "@paperclip-sandbox/kit";

/** A JWT from the exchange, with what the exchange said about it. */
export interface ExchangedToken {
  token: string;
  /** Expiry, epoch ms. */
  expiresAt: number;
  /** The account the key belongs to (the exchange's `user_id`). */
  userId: string;
}

/** The bearer token for one API key: exchanged once, reused, refreshed before it expires. */
export interface TokenSource {
  current(signal?: AbortSignal): Promise<ExchangedToken>;
  /** Forget a token boxd refused (UNAUTHENTICATED before its expiry): the next call exchanges again. */
  invalidate(token: string): void;
}

export interface TokenCacheOptions {
  fetch?: typeof globalThis.fetch;
  now?: () => number;
  /** Refresh this long before expiry (default 30 s; at most half the token's lifetime). */
  refreshBeforeMs?: number;
  timeoutMs?: number;
}

const DEFAULT_REFRESH_BEFORE_MS = 30_000;

/** The exchange over the kit's vendor call: `vendorFetch` already types its failures; the exchange has no effect but the token, so repeating it is harmless. */
const exchangeCall = createVendorCall({ translate: (error) => error, retry: { attempts: 3, totalMs: 30_000 } });

interface Held extends ExchangedToken {
  issuedAt: number;
}

/**
 * API key → JWT, one exchange per key (and exchange URL) for as long as the token lives, shared by
 * every lease and command of the worker. Concurrent callers wait for the one exchange in flight.
 * The exchange is rate-limited per source IP at boxd, so it is never made per command.
 */
export function createTokenCache(options: TokenCacheOptions = {}) {
  const now = options.now ?? Date.now;
  const refreshBefore = options.refreshBeforeMs ?? DEFAULT_REFRESH_BEFORE_MS;
  const entries = new Map<string, { token?: Held; pending?: Promise<Held> }>();
  let exchanges = 0;

  /** Still usable without a refresh: more than the margin left (at most half its lifetime, for short-lived tokens). */
  const fresh = (token: Held | undefined): token is Held => token !== undefined && token.expiresAt - now() > Math.min(refreshBefore, (token.expiresAt - token.issuedAt) / 2);

  async function exchange(apiKey: string, url: URL, signal: AbortSignal | undefined): Promise<Held> {
    exchanges += 1;
    const issuedAt = now();
    const response = await exchangeCall(
      "exchangeApiKey",
      ({ remainingMs }) =>
        vendorFetch(
          { operation: "exchangeApiKey", method: "POST", url, json: { api_key: apiKey }, timeoutMs: Math.min(options.timeoutMs ?? 30_000, remainingMs), signal },
          { vendor: "boxd", secrets: [apiKey], fetch: options.fetch },
        ),
      // The exchange has no effect but the token: repeating it is harmless.
      { idempotent: true, ...(signal ? { signal } : {}) },
    );
    const body = response.json<{ token?: unknown; expires_at?: unknown; user_id?: unknown }>();
    if (typeof body?.token !== "string" || body.token === "" || typeof body.expires_at !== "number") {
      throw new ProviderApiError({
        vendor: "boxd",
        operation: "exchangeApiKey",
        status: response.status,
        code: "invalid_response",
        detail: "the token exchange answered without token and expires_at",
        retryable: false,
        gone: false,
        mayHaveTakenEffect: false,
      });
    }
    const expiresAt = body.expires_at * 1000;
    if (expiresAt <= now()) {
      throw new ProviderApiError({
        vendor: "boxd",
        operation: "exchangeApiKey",
        status: response.status,
        code: "expired_token",
        detail: "the token exchange answered an already expired token (check this machine's clock)",
        retryable: false,
        gone: false,
        mayHaveTakenEffect: false,
      });
    }
    return { token: body.token, expiresAt, userId: typeof body.user_id === "string" ? body.user_id : "", issuedAt };
  }

  return {
    /** How many exchanges this cache made (for tests and benchmarks). */
    get exchanges() {
      return exchanges;
    },
    forKey(apiKey: string, exchangeUrl: URL): TokenSource {
      const key = createHash("sha256").update(apiKey).update("\0").update(exchangeUrl.href).digest("hex");
      let entry = entries.get(key);
      if (!entry) entries.set(key, (entry = {}));
      const slot = entry;
      return {
        async current(signal) {
          if (fresh(slot.token)) return slot.token;
          // A token past its refresh point but still valid is refreshed; a caller never waits on an expired one.
          slot.pending ??= exchange(apiKey, exchangeUrl, signal).then(
            (token) => {
              slot.token = token;
              slot.pending = undefined;
              return token;
            },
            (error: unknown) => {
              slot.pending = undefined;
              throw error;
            },
          );
          return slot.pending;
        },
        invalidate(token) {
          if (slot.token?.token === token) slot.token = undefined;
        },
      };
    },
  };
}

export type TokenCache = ReturnType<typeof createTokenCache>;
