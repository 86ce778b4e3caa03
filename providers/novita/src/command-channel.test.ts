// The kit's command channel in Novita sandboxes (the envd emulator, the real novita-sandbox SDK, in
// process): its stdin is one envd StreamInput stream sent with Novita's routing headers.
import { afterAll, expect, it, vi } from "vitest";
import { hostFor, useCommandChannelSwitch } from "@paperclip-sandbox/conformance";
import { runEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "@paperclip-sandbox/emulator-envd";
import { commandChannelStatus } from "@paperclip-sandbox/kit";
import { createNovitaPlugin } from "./plugin.js";

const emu = await runEmulator(emulator);
useCommandChannelSwitch();
afterAll(async () => {
  await emu.close();
});

it("a steady command is no vendor call: the channel's input rides its one StreamInput stream", async () => {
  const h = hostFor(createNovitaPlugin().plugin, { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sandboxUrl: emu.url, timeoutMs: 120_000 }, { driverKey: "novita" });
  const lease = await h.acquire();
  try {
    await vi.waitFor(() => expect(commandChannelStatus(lease.providerLeaseId!).state).toBe("ready"), { timeout: 30_000, interval: 50 });
    await h.sh(lease, "true");
    const mark = emu.requests.mark();
    const outs: string[] = [];
    for (const word of ["one", "two", "three"]) outs.push((await h.sh(lease, `echo ${word}`)).stdout);
    expect(outs).toEqual(["one\n", "two\n", "three\n"]);
    // The lease's timeout refreshes run on their own timer.
    expect(
      emu.requests
        .list({ since: mark, includeRunning: true })
        .filter((r) => r.route !== "/sandboxes/:id/timeout")
        .map((r) => r.route),
    ).toEqual([]);
    expect(emu.requests.list({ includeRunning: true }).filter((r) => r.route === "/process.Process/SendInput")).toEqual([]);
  } finally {
    await h.release(lease);
    await h.shutdown();
  }
  expect(await emu.leftovers()).toEqual([]);
});
