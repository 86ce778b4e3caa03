import type { App, Image, Logger, ModalClient } from "modal";
import { apiErrorFromGrpcStatus, createClientCache, createVendorCall, isProviderApiError, memoAsyncByKey, ProviderApiError, type Redactor, type VendorCall } from "@paperclip-sandbox/kit";
import { credentialsOf, type ModalConfig } from "./config.js";

export type ModalSdk = typeof import("modal");

/**
 * Loads the SDK with its config file turned off: 0.11.1 reads `~/.modal.toml` (or MODAL_CONFIG_PATH)
 * when it is imported, and a profile there would otherwise change the server, environment or
 * sandbox backend behind the provider's config.
 */
export function loadModalSdk(): Promise<ModalSdk> {
  process.env.MODAL_CONFIG_PATH ||= "/nonexistent/paperclip-modal.toml";
  return import("modal");
}

const NOT_FOUND = 5;
const RESOURCE_EXHAUSTED = 8;

/** The gRPC status of a nice-grpc ClientError (what the SDK throws for what it does not wrap). */
function grpcCodeOf(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { name, code } = error as { name?: unknown; code?: unknown };
  return name === "ClientError" && typeof code === "number" ? code : undefined;
}

/**
 * An SDK failure as the kit's typed error. A gRPC status is read by the kit's one table
 * (`apiErrorFromGrpcStatus`: NOT_FOUND is gone), with Modal's meanings on top: RESOURCE_EXHAUSTED is
 * a refusal (rate limit or quota, nothing was done), so it is retried, even for a create: the SDK
 * never retries it. UNAVAILABLE and the other transient codes the SDK has already retried (3 times
 * on the control plane, 10 on the router), so they are final here. The SDK's own errors keep their
 * name as the code; its NotFoundError means the thing is gone.
 */
export function modalError(operation: string, error: unknown, redact: Redactor): Error {
  if (isProviderApiError(error)) return error;
  const code = grpcCodeOf(error);
  const name = (error as { name?: unknown } | null)?.name;
  const raw = error instanceof Error ? ((error as { details?: unknown }).details as string | undefined) || error.message : String(error);
  if (code !== undefined) {
    const refused = code === RESOURCE_EXHAUSTED;
    return apiErrorFromGrpcStatus({ vendor: "modal", operation, code, message: raw, redact, notProcessed: refused }).with({ retryable: refused });
  }
  if (typeof name !== "string") return error instanceof Error ? error : new Error(redact(raw));
  return new ProviderApiError({ vendor: "modal", operation, status: 0, code: name, detail: redact(raw), retryable: false, gone: name === "NotFoundError", mayHaveTakenEffect: true });
}

export function isGone(error: unknown): boolean {
  return isProviderApiError(error) ? error.gone : grpcCodeOf(error) === NOT_FOUND || (error as { name?: unknown } | null)?.name === "NotFoundError";
}

/** One account's SDK client, with the app and registry images it has resolved (one lookup each per worker). */
export interface ModalAccount {
  readonly sdk: ModalSdk;
  readonly client: ModalClient;
  readonly redact: Redactor;
  /** Runs an SDK call, typing its failure and retrying what may be retried. */
  call: VendorCall;
  app(name: string, opts?: { create?: boolean }): Promise<App>;
  registryImage(tag: string): Image;
  close(): void;
}

export interface AccountDeps {
  loadSdk: () => Promise<ModalSdk>;
  env: NodeJS.ProcessEnv;
  /** Where the SDK's own warnings go (the host's logger once the plugin is set up). */
  logger: () => Pick<Logger, "warn"> | undefined;
}

/** Builds (and keeps) one client per server, token and environment. */
export function createAccounts(deps: AccountDeps) {
  type Key = { config: Pick<ModalConfig, "serverUrl" | "environment">; credentials: { tokenId: string; tokenSecret: string }; redact: Redactor };
  const accounts = createClientCache(
    ({ config, credentials }: Key) => [config.serverUrl, credentials.tokenId, credentials.tokenSecret, config.environment ?? ""],
    ({ config, credentials, redact }: Key) => open(config, credentials, redact),
  );

  return {
    of(config: Pick<ModalConfig, "serverUrl" | "tokenId" | "tokenSecret" | "environment">, redact: Redactor, env: NodeJS.ProcessEnv = deps.env): Promise<ModalAccount> {
      const { credentials, missing } = credentialsOf(config, env);
      if (!credentials) return Promise.reject(new Error(`modal: ${missing.join("; ")}`));
      return accounts.get({ config, credentials, redact });
    },
    closeAll() {
      for (const account of accounts.values())
        void account.then(
          (opened) => opened.close(),
          () => undefined,
        );
      accounts.clear();
    },
  };

  async function open(config: Pick<ModalConfig, "serverUrl" | "environment">, credentials: { tokenId: string; tokenSecret: string }, redact: Redactor): Promise<ModalAccount> {
    const sdk = await deps.loadSdk();
    const forward = (level: "warn" | "error") => (message: string) => {
      // Expected with a loopback server URL (the emulator): the router is dialled without TLS.
      if (/^Using insecure TLS/.test(message)) return;
      deps.logger()?.warn(`modal sdk ${level}: ${redact(message)}`);
    };
    // 0.11.1 takes the server only from MODAL_SERVER_URL (its `endpoint` parameter is never read),
    // and reads it in the constructor: set it around the synchronous construction alone.
    const saved = process.env.MODAL_SERVER_URL;
    process.env.MODAL_SERVER_URL = config.serverUrl;
    let client: ModalClient;
    try {
      client = new sdk.ModalClient({
        tokenId: credentials.tokenId,
        tokenSecret: credentials.tokenSecret,
        ...(config.environment ? { environment: config.environment } : {}),
        logger: { debug: () => undefined, info: () => undefined, warn: forward("warn"), error: forward("error") },
        logLevel: "warn",
      });
    } finally {
      if (saved === undefined) delete process.env.MODAL_SERVER_URL;
      else process.env.MODAL_SERVER_URL = saved;
    }
    const apps = memoAsyncByKey<App>();
    const images = new Map<string, Image>();
    const account: ModalAccount = {
      sdk,
      client,
      redact,
      call: createVendorCall({ translate: (error, operation) => modalError(operation, error, redact), retry: { attempts: 4, totalMs: 30_000, baseDelayMs: 250 } }),
      app(name, opts = {}) {
        const create = opts.create !== false;
        return apps.get(`${create}:${name}`, () => account.call("lookupApp", () => client.apps.fromName(name, { createIfMissing: create }), { idempotent: true }));
      },
      registryImage(tag) {
        // An Image remembers its id once built, so later creates skip ImageGetOrCreate.
        let image = images.get(tag);
        if (!image) images.set(tag, (image = client.images.fromRegistry(tag)));
        return image;
      },
      close() {
        client.close();
      },
    };
    return account;
  }
}
