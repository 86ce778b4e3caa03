import { Daytona } from "@daytonaio/sdk";
import { createClientCache, createSecretRedactor, createVendorCall, type ProviderApiError, type Redactor, type RetryEvent } from "@paperclip-sandbox/kit";
import { API_KEY_ENV, apiKeyOf, type DaytonaConfig } from "./config.js";
import { daytonaApiError, type TranslateOptions } from "./errors.js";

interface CallOptions extends TranslateOptions {
  /** Repeating the call is harmless (GET, DELETE, state changes that are no-ops when done). */
  idempotent: boolean;
  /** Attempts in all (default 2); 1 for a call whose body cannot be sent twice. */
  attempts?: number;
  /** The call's requests are GET/PUT/DELETE, whose connection resets the SDK already retries. */
  safeMethod?: boolean;
  signal?: AbortSignal;
}

/** The SDK client of one Daytona endpoint and key, and the one way provider code calls it. */
export interface DaytonaClient {
  readonly sdk: Daytona;
  readonly redact: Redactor;
  /**
   * Runs one SDK call; a transient failure (429, 5xx, a lost connection) is tried once more, only
   * when repeating it is safe. The SDK retries no HTTP status itself (only connection failures,
   * which are then not retried again here), so a call costs at most two attempts. Failures come out
   * as `ProviderApiError`s without the key.
   */
  call<T>(operation: string, run: () => Promise<T>, options: CallOptions): Promise<T>;
  /** The SDK's error translated and redacted (for calls made outside `call`). */
  error(error: unknown, operation: string, options?: TranslateOptions): ProviderApiError;
}

export interface ClientDeps {
  env?: NodeJS.ProcessEnv;
  onRetry?: (operation: string, event: RetryEvent) => void;
}

/** Attempts per SDK call: the first and one retry ("retried once overall"). */
const ATTEMPTS = 2;

export function createDaytonaClient(config: DaytonaConfig, deps: ClientDeps = {}): DaytonaClient {
  const apiKey = apiKeyOf(config, deps.env);
  if (!apiKey) throw new Error(`Daytona API key is not set: set API key in the environment, or ${API_KEY_ENV} in the plugin worker's environment`);
  const redactor = createSecretRedactor([apiKey]);
  // apiUrl is always explicit: the SDK refuses an endpoint that both the process env and a .env name.
  // Polling instead of the socket.io event stream: no background connection per worker.
  const sdk = new Daytona({ apiKey, apiUrl: config.apiUrl, ...(config.target ? { target: config.target } : {}), useDeprecatedPolling: true });
  const error = (raw: unknown, operation: string, options?: TranslateOptions) => daytonaApiError(raw, operation, redactor.redact, options);
  const call = createVendorCall<Omit<CallOptions, "idempotent" | "attempts" | "signal">>({
    translate(raw, operation, options) {
      const failure = error(raw, operation, options);
      // The SDK's own retries (connect-phase failures of any request, resets of safe methods)
      // already ran: another round here would multiply the attempts.
      const sdkRetried = failure.code === "connect_failed" || (failure.code === "connection_reset" && options.safeMethod === true);
      return sdkRetried ? failure.with({ retryable: false }) : failure;
    },
    retry: { attempts: ATTEMPTS, totalMs: 60_000 },
    onRetry: (operation, event) => deps.onRetry?.(operation, event),
  });
  return { sdk, redact: redactor.redact, error, call: (operation, run, options) => call(operation, run, options) };
}

/** One client per endpoint, target and key, made on first use (no module-level state: the plugin owns it). */
export function createClientPool(deps: ClientDeps = {}): (config: DaytonaConfig, env?: NodeJS.ProcessEnv) => DaytonaClient {
  const clients = createClientCache(
    ({ config, env }: { config: DaytonaConfig; env: NodeJS.ProcessEnv | undefined }) => [config.apiUrl, config.target ?? "", apiKeyOf(config, env) ?? ""],
    ({ config, env }) => createDaytonaClient(config, { ...deps, env }),
  );
  return (config, env = deps.env) => clients.get({ config, env });
}
