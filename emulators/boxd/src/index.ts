import { fileURLToPath } from "node:url";
import { createJwtIssuer, createRouter, createVendorClock, HttpError, type EmulatorDefinition } from "@paperclip-sandbox/emulator-kit";
import { boxdHandlers, SERVICE, type TokenClaims } from "./handlers.js";
import { refusedPaths } from "./coverage.js";
import { createMachineManager } from "./machines.js";
import { resolveOptions, type BoxdEmulatorControl, type BoxdEmulatorOptions } from "./options.js";

export type { BoxdAccount, BoxdEmulatorControl, BoxdEmulatorOptions } from "./options.js";
export { newApiKey } from "./options.js";
export { SIZE_CLASSES, DISK_BYTES } from "./machines.js";
export { GUEST_HOME } from "./exec.js";
export { BOXD_COVERAGE, REFUSED_RPCS, boxdOperations } from "./coverage.js";

export const BOXD_PROTO_PATH = fileURLToPath(new URL("../proto/boxd.proto", import.meta.url));
/** The token exchange's path (boxd serves it at https://app.boxd.sh/api/v1/auth/token). */
export const EXCHANGE_PATH = "/api/v1/auth/token";

/**
 * boxd's public gRPC API (`boxd.api.v1.BoxdApi`) on a loopback h2c port, and its API-key → JWT
 * exchange on a second (HTTP) port. Every RPC needs `authorization: Bearer <JWT>` from the exchange.
 * Machines are bubblewrap jails from the sandbox backend: suspend and hibernate freeze them (memory
 * and processes kept), stop is a cold stop that keeps the disk, snapshots copy the disk, the delete
 * timer and the idle timers run on a clock scaled by `timeScale`.
 */
export const emulator: EmulatorDefinition<BoxdEmulatorOptions> = {
  name: "boxd",
  description: "boxd's gRPC API (boxd.api.v1.BoxdApi: machines, exec, files, snapshots) and its token exchange",
  async start(kit, options) {
    const resolved = resolveOptions(options);
    // Jails under <root>/b, snapshots beside them under <root>/snapshots.
    const { backend, root } = await kit.backend({ ...(resolved.scratchParent ? { parentDir: resolved.scratchParent } : {}), prefix: "bxd", stateSubdir: "b" });
    const machines = createMachineManager({
      backend,
      clock: resolved.clock ?? createVendorClock({ timeScale: resolved.timeScale }),
      scratch: root,
      maxMachinesPerOrg: resolved.maxMachinesPerOrg,
      legacyAgent: resolved.legacyAgent,
      log: (message) => process.stderr.write(`${message}\n`),
    });
    const tokens = createJwtIssuer<TokenClaims>();
    const exchanges = new Map<string, number>();

    // The exchange: POST {"api_key"} → {"token", "expires_at", "user_id"}; a bad key is 401.
    const router = createRouter({ errorEnvelope: ({ message }) => ({ error: message }) });
    router.post(EXCHANGE_PATH, async (ctx) => {
      const body = await ctx.readJson<{ api_key?: unknown }>(16 * 1024).catch(() => undefined);
      const key = typeof body?.api_key === "string" ? body.api_key : "";
      const account = resolved.accounts.find((a) => a.apiKey === key);
      if (!account) throw new HttpError(401, key ? "invalid API key" : "api_key: required");
      exchanges.set(key, (exchanges.get(key) ?? 0) + 1);
      const issued = tokens.issue({ sub: account.userId, org: account.org }, resolved.tokenTtlSeconds);
      return { token: issued.token, expires_at: issued.expiresAt, user_id: account.userId };
    });
    const http = await kit.http(router, { port: resolved.exchangePort });

    const server = await kit.grpc({
      protoPath: BOXD_PROTO_PATH,
      loaderOptions: { longs: Number, enums: String },
      port: resolved.port,
      services: { [SERVICE]: boxdHandlers({ machines, tokens, accounts: resolved.accounts }) },
      // boxd's documented RPCs outside the proto subset: UNIMPLEMENTED with the reason, recorded.
      refused: refusedPaths(),
    });

    const control: BoxdEmulatorControl = {
      machines: () =>
        machines.all().map((m) => ({
          id: m.id,
          name: m.name,
          org: m.org,
          owner: m.owner,
          status: m.status,
          vcpu: m.vcpu,
          memoryBytes: m.memoryBytes,
          isolated: m.isolated,
          labels: { ...m.labels },
          destroyAt: m.destroyAt,
          legacyAgent: m.legacyAgent,
          snapshot: m.snapshot,
        })),
      setLegacyAgent(vmId, legacy) {
        const m = machines.byId(vmId);
        if (!m) throw new TypeError(`no machine ${vmId}`);
        m.legacyAgent = legacy;
      },
      exchanges: (apiKey) => exchanges.get(apiKey) ?? 0,
    };
    resolved.expose?.(control);

    const exchangeUrl = `${http.url}${EXCHANGE_PATH}`;
    const first = resolved.accounts[0]!;
    return {
      url: server.url,
      endpoints: { exchange: exchangeUrl },
      credentials: { apiKey: first.apiKey, org: first.org },
      env: { BOXD_BASE_URL: server.url, BOXD_EXCHANGE_URL: exchangeUrl, BOXD_API_KEY: first.apiKey },
      async leftovers() {
        return [...machines.all().map((m) => `machine ${m.id} (${m.name}, ${m.status})`), ...machines.snapshots().map((s) => `snapshot ${s.org}/${s.name} v${s.version}`)];
      },
      async close() {
        await machines.close();
      },
    };
  },
};
