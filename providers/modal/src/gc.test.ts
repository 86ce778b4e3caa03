// `paperclip-sandbox leases gc` with this provider: its lister finds the app's running sandboxes by
// tag at Modal (the emulator), and the CLI destroys the orphans through the worker's destroy hook.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PluginContext } from "@paperclipai/plugin-sdk";
import { cliSkipReason } from "@paperclip-sandbox/conformance";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-modal";
import { createModalPlugin } from "./plugin.js";

const pluginDir = fileURLToPath(new URL("..", import.meta.url));
const cli = fileURLToPath(new URL("../../../packages/cli/dist/main.js", import.meta.url));
const cliSkip = cliSkipReason(cli);
if (cliSkip) console.log(`modal leases gc through the CLI skipped: ${cliSkip}`);
let emu: RunningEmulator;
let home: string;

beforeAll(async () => {
  if (cliSkip) return;
  emu = await runEmulator(emulator, {});
  home = mkdtempSync(path.join(os.tmpdir(), "modal-gc-"));
});
afterAll(async () => {
  await emu?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

function gc(...extra: string[]): Promise<{ code: number | null; out: string }> {
  const args = [
    "leases",
    "gc",
    "--db",
    path.join(home, "leases.db"),
    "--provider",
    pluginDir,
    "--set",
    `serverUrl=${emu.url}`,
    "--set",
    "appName=gc-test",
    "--secret",
    "tokenId=GC_ID",
    "--secret",
    "tokenSecret=GC_SECRET",
    ...extra,
  ];
  const child = spawn(process.execPath, [cli, ...args], {
    env: { PATH: process.env.PATH ?? "", HOME: home, XDG_STATE_HOME: path.join(home, "state"), GC_ID: emu.credentials.tokenId!, GC_SECRET: emu.credentials.tokenSecret! },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk));
  child.stderr.on("data", (chunk: Buffer) => (out += chunk));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out })));
}

describe.skipIf(cliSkip)("leases gc --provider modal", () => {
  it("lists the orphaned sandbox by its tags and destroys it; sandboxes of others stay", async () => {
    const config = { tokenId: emu.credentials.tokenId, tokenSecret: emu.credentials.tokenSecret, serverUrl: emu.url, appName: "gc-test" };
    const plugin = createModalPlugin({ env: {} });
    const hooks = plugin.provider.plugin.definition as Required<typeof plugin.provider.plugin.definition>;
    await hooks.setup({ execution: { log: () => undefined } } as unknown as PluginContext);
    // A lease whose host forgot it: acquired, never released.
    const orphan = await hooks.onEnvironmentAcquireLease({ driverKey: "modal", companyId: "gone-company", environmentId: "gone-env", config, runId: "lost-run" });
    // Someone else's sandbox in the same app, without the provider's tags.
    const account = await plugin.accountOf({ ...config, appName: "gc-test" } as never);
    const app = await account.client.apps.fromName("gc-test", { createIfMissing: true });
    const foreign = await account.client.sandboxes.create(app, account.client.images.fromRegistry("node:22"), { tags: { owner: "someone-else" } });
    try {
      const dry = await gc("--dry-run", "--yes");
      expect(dry.code, dry.out).toBe(0);
      expect(dry.out).toMatch(new RegExp(`would destroy\\s+modal\\s+${orphan.providerLeaseId}\\s+listing`));
      expect(dry.out).not.toContain(foreign.sandboxId);

      const done = await gc("--yes");
      expect(done.code, done.out).toBe(0);
      expect(done.out).toMatch(new RegExp(`destroyed\\s+modal\\s+${orphan.providerLeaseId}\\s+listing`));
      expect(done.out).not.toContain(emu.credentials.tokenSecret!);
      expect(await emu.leftovers()).toEqual([`sandbox ${foreign.sandboxId} (running)`]);
    } finally {
      await foreign.terminate();
      plugin.accounts.closeAll();
    }
  });
});
