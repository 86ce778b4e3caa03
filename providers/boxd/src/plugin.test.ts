// The plugin's guards against the boxd emulator: destroy checks the account and the labels first,
// a failed acquire whose machine cannot be deleted names it, a probe that cannot delete its machine
// fails (and boxd's 15-minute delete timer removes it anyway).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator, newApiKey } from "@paperclip-sandbox/emulator-boxd";
import { createBoxdPlugin } from "./plugin.js";

let emu: RunningEmulator;
const intruder = { apiKey: newApiKey(), userId: "intruder", org: "personal" };
const scope = { driverKey: "boxd", companyId: "co-1", environmentId: "env-1" };

beforeAll(async () => {
  // Two accounts in one org (two members' keys); boxd's clocks 100x faster (15 min → 9 s).
  emu = await runEmulator(emulator, { options: { timeScale: 100, accounts: [{ apiKey: newApiKey(), userId: "owner", org: "personal" }, intruder] } });
});
afterAll(() => emu.close());

const configOf = (apiKey = emu.credentials.apiKey!) => ({ apiKey, apiUrl: emu.url, exchangeUrl: emu.endpoints.exchange! });
async function pluginFor(apiKey?: string) {
  const boxd = createBoxdPlugin({ env: {} });
  const hooks = boxd.plugin.definition as Required<typeof boxd.plugin.definition>;
  await hooks.setup({ execution: { log: () => undefined }, logger: { info() {}, warn() {}, error() {}, debug() {} } } as unknown as PluginContext);
  return { boxd, hooks, config: configOf(apiKey), api: boxd.apiOf(boxd.definition.config.parse(configOf(apiKey))) };
}

describe("boxd plugin guards", () => {
  it("destroy refuses a lease made by another boxd account, and a machine labelled for another environment", { timeout: 60_000 }, async () => {
    const owner = await pluginFor();
    const lease = await owner.hooks.onEnvironmentAcquireLease({ ...scope, config: owner.config, runId: "run-1" });
    expect(lease.metadata).toMatchObject({ account: "owner" });
    const other = await pluginFor(intruder.apiKey);
    await expect(other.hooks.onEnvironmentDestroyLease({ ...scope, config: other.config, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).rejects.toThrow(
      `refusing to delete boxd machine ${lease.providerLeaseId}: its lease was made by boxd account owner, the configured key belongs to intruder`,
    );
    await expect(
      owner.hooks.onEnvironmentDestroyLease({ ...scope, environmentId: "env-2", config: owner.config, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata }),
    ).rejects.toThrow(/refusing to touch boxd sandbox .*paperclip-environment is "env-1", expected "env-2"/);
    expect((await owner.api.getMachine(lease.providerLeaseId!))?.status).toBe("running");
    expect(await owner.hooks.onEnvironmentDestroyLease({ ...scope, config: owner.config, providerLeaseId: lease.providerLeaseId, leaseMetadata: lease.metadata })).toEqual({
      providerLeaseId: lease.providerLeaseId,
      state: "destroyed",
    });
    await owner.hooks.onShutdown?.();
    await other.hooks.onShutdown?.();
  });

  it("a failed acquire deletes its machine; when that cannot be confirmed the error names the machine", { timeout: 60_000 }, async () => {
    const { hooks, config, api } = await pluginFor();
    // The workspace's Exec fails after the create, and every deletion is refused.
    emu.faults.inject({ kind: "status", route: "/boxd.api.v1.BoxdApi/Exec", grpcCode: 9, times: 1 });
    const refusing = emu.faults.inject({ kind: "status", route: "/boxd.api.v1.BoxdApi/DestroyVm", grpcCode: 13, times: 1000 });
    const error = await hooks.onEnvironmentAcquireLease({ ...scope, config, runId: "run-failing" }).catch((e: Error & { code?: string }) => e);
    refusing.remove();
    emu.faults.clear();
    expect(error).toMatchObject({ name: "CreationCleanupError", code: "CREATION_CLEANUP_REQUIRED" });
    const [machine] = await api.listMachines({ labels: { "paperclip-run": "run-failing" } });
    expect(machine).toBeDefined();
    expect((error as Error).message).toContain(`after resource ${machine!.id} was created`);
    await api.destroyMachine(machine!.id);
    await hooks.onShutdown?.();
  });

  it("a probe that cannot delete its machine fails; boxd's 15-minute delete timer removes it anyway", { timeout: 60_000 }, async () => {
    const { hooks, config, api } = await pluginFor();
    const refusing = emu.faults.inject({ kind: "status", route: "/boxd.api.v1.BoxdApi/DestroyVm", grpcCode: 13, times: 1000 });
    const probe = await hooks.onEnvironmentProbe({ ...scope, environmentId: "env-probe", config });
    refusing.remove();
    expect(probe.ok).toBe(false);
    expect(probe.diagnostics?.map((d) => d.code)).toEqual(expect.arrayContaining(["PROBE_CREATE_OK", "PROBE_EXEC_OK", "PROBE_DESTROY_FAILED"]));
    const [left] = await api.listMachines({ labels: { "paperclip-environment": "env-probe" } });
    expect(left?.destroyAt).toBeInstanceOf(Date);
    // 15 minutes of boxd time (9 s here) after the probe set it.
    expect(left!.destroyAt!.getTime() - Date.now()).toBeLessThanOrEqual(15 * 60_000);
    const deadline = Date.now() + 30_000;
    while ((await api.listMachines({ labels: { "paperclip-environment": "env-probe" } })).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
    expect(await api.listMachines({ labels: { "paperclip-environment": "env-probe" } })).toEqual([]);
    await hooks.onShutdown?.();
  });
});
