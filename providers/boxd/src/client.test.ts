// The gRPC client against the boxd emulator: one token exchange per key, a refused token exchanged
// again, and the proto the two share.
import { getEventListeners } from "node:events";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { BOXD_PROTO_PATH as EMULATOR_PROTO, emulator, type BoxdEmulatorControl } from "@paperclip-sandbox/emulator-boxd";
import { createBoxdApi } from "./api.js";
import { createBoxdPlugin } from "./plugin.js";
import { createTokenCache } from "./tokens.js";
import { BOXD_PROTO_PATH } from "./wire.js";

let emu: RunningEmulator;
let control: BoxdEmulatorControl;

beforeAll(async () => {
  emu = await runEmulator(emulator, { options: { expose: (c) => (control = c) } });
});
afterAll(() => emu.close());

const configOf = (e: RunningEmulator) => ({ apiKey: e.credentials.apiKey!, apiUrl: e.url, exchangeUrl: e.endpoints.exchange! });

describe("boxd client", () => {
  it("speaks the same proto as the emulator (one definition, two copies)", async () => {
    expect(await readFile(BOXD_PROTO_PATH, "utf8")).toBe(await readFile(EMULATOR_PROTO, "utf8"));
  });

  it("exchanges the API key once for two leases and ten commands", { timeout: 60_000 }, async () => {
    const boxd = createBoxdPlugin({ env: {} });
    const hooks = boxd.plugin.definition as Required<typeof boxd.plugin.definition>;
    await hooks.setup({ execution: { log: () => undefined }, logger: console } as unknown as PluginContext);
    const scope = { driverKey: "boxd", companyId: "c", environmentId: "e" };
    const config = configOf(emu);
    const before = control.exchanges(config.apiKey);
    const a = await hooks.onEnvironmentAcquireLease({ ...scope, config, runId: "run-a" });
    const b = await hooks.onEnvironmentAcquireLease({ ...scope, config, runId: "run-b" });
    for (let i = 0; i < 5; i++) {
      for (const lease of [a, b]) expect((await hooks.onEnvironmentExecute({ ...scope, config, lease, command: "true" })).exitCode).toBe(0);
    }
    await hooks.onEnvironmentDestroyLease({ ...scope, config, providerLeaseId: a.providerLeaseId, leaseMetadata: a.metadata });
    await hooks.onEnvironmentDestroyLease({ ...scope, config, providerLeaseId: b.providerLeaseId, leaseMetadata: b.metadata });
    await hooks.onShutdown?.();
    expect(control.exchanges(config.apiKey) - before).toBe(1);
    expect(boxd.tokens.exchanges).toBe(1);
  });

  it("a token boxd refuses (expired early) is exchanged again once, and the call goes through", { timeout: 30_000 }, async () => {
    let short: BoxdEmulatorControl | undefined;
    const e2 = await runEmulator(emulator, { options: { tokenTtlSeconds: 1, expose: (c) => (short = c) } });
    try {
      // A cache whose clock stands still never refreshes by itself: only boxd's refusal can make it.
      const tokens = createTokenCache({ now: () => 0 });
      const api = createBoxdApi({ ...configOf(e2), tokens });
      expect(await api.whoami()).toEqual({ userId: "paperclip-e2e", displayName: "Paperclip Emulator" });
      // A 1-second token expires within 2 s (its exp is rounded up to a whole second).
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      expect((await api.whoami()).userId).toBe("paperclip-e2e");
      expect(short!.exchanges(e2.credentials.apiKey!)).toBe(2);
      expect(e2.requests.list({ route: "/boxd.api.v1.BoxdApi/Whoami" }).map((r) => r.code)).toEqual(["OK", "UNAUTHENTICATED", "OK"]);
      api.close();
    } finally {
      await e2.close();
    }
  });

  it("answers boxd's codes as typed errors: unknown machines are null, a taken name and another org refused", { timeout: 30_000 }, async () => {
    const api = createBoxdApi({ ...configOf(emu), tokens: createTokenCache() });
    expect(await api.getMachine("no-such-machine")).toBeNull();
    await api.destroyMachine("no-such-machine"); // a machine already gone is success
    const made = await api.createMachine({ name: "taken-name", labels: { "paperclip-run": "r1" } });
    await expect(api.createMachine({ name: "taken-name", labels: { "paperclip-run": "r2" } })).rejects.toMatchObject({ code: "already_exists", retryable: false });
    await expect(api.createMachine({ name: "elsewhere", labels: {}, org: "other-org" })).rejects.toMatchObject({ code: "permission_denied" });
    await expect(api.createMachine({ name: "three", labels: {}, vcpu: 3 })).rejects.toMatchObject({ code: "invalid_argument" });
    await api.destroyMachine(made.id);
    api.close();
  });

  it("leaves no abort listener on the caller's signal once a call is done (a poll reuses one signal for many calls)", { timeout: 30_000 }, async () => {
    const api = createBoxdApi({ ...configOf(emu), tokens: createTokenCache() });
    const made = await api.createMachine({ name: "listeners", labels: { "paperclip-run": "r3" } });
    const budget = new AbortController();
    for (let i = 0; i < 12; i++) expect(await api.getMachine(made.id, budget.signal)).not.toBeNull();
    await api.writeFile(made.id, "/tmp/listeners", Buffer.from("x"), 0o600, budget.signal);
    await api.uploadFile(made.id, "/tmp/listeners-upload", Buffer.from("y"), budget.signal);
    expect(getEventListeners(budget.signal, "abort")).toHaveLength(0);
    await api.destroyMachine(made.id);
    api.close();
  });
});
