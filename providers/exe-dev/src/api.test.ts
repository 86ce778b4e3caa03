// The exe.dev API as the provider meets it: token permission errors named, the token never shown,
// the EXE_API_KEY fallback, transient answers retried without a second VM, and the calls a lease costs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startExeDevEmulator } from "@paperclip-sandbox/emulator-exe-dev";
import { startHarness, type Harness } from "./__fixtures__/harness.js";
import { copyOwnVm, createExeDevApi } from "./api.js";
import { apiKeyOf, normalizeApiUrl, type ExeDevConfig } from "./config.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
}, 60_000);
afterAll(() => h?.close(), 60_000);

describe("token permissions", () => {
  it("names the missing command when the token may not create VMs, and leaves nothing", async () => {
    const token = h.emu.control.mintToken({ cmds: ["ls", "rm"] });
    const failure = await h.acquire({ apiKey: token }).then(
      () => "acquired",
      (error: Error) => error.message,
    );
    expect(failure).toMatch(/exe\.dev new failed: HTTP 403 .*the API token may not run "new" \(command not allowed by token permissions\); make a token whose cmds include new, ls, rm/);
    expect(failure).not.toContain(token);
    expect(await h.emu.leftovers()).toEqual([]);
  }, 60_000);

  it("names the missing rm at release, and the VM stays for a token that may delete it", async () => {
    const lease = await h.acquire();
    const noRm = h.emu.control.mintToken({ cmds: ["new", "ls"] });
    const failure = await h.release(lease, { apiKey: noRm }).then(
      () => "released",
      (error: Error) => error.message,
    );
    expect(failure).toMatch(/exe\.dev rm failed: HTTP 403 .*the API token may not run "rm"/);
    expect(h.emu.control.vmNames()).toContain(lease.providerLeaseId);
    expect(await h.destroy(lease)).toEqual({ providerLeaseId: lease.providerLeaseId, state: "destroyed" });
  }, 60_000);

  it("says the token was refused (401) without quoting it", async () => {
    const stranger = await startExeDevEmulator();
    try {
      const token = stranger.credentials.apiKey!;
      const failure = await h.acquire({ apiKey: token }).then(
        () => "acquired",
        (error: Error) => error.message,
      );
      expect(failure).toMatch(/exe\.dev new failed: HTTP 401 .*exe\.dev refused the API token \(invalid token\); check the API token field or EXE_API_KEY/);
      expect(failure).not.toContain(token);
    } finally {
      await stranger.close();
    }
  }, 60_000);

  it("uses the worker's EXE_API_KEY when the config has no token", async () => {
    const fallback = await startHarness({}, { env: { EXE_API_KEY: "" } });
    try {
      const { apiKey, ...withoutToken } = fallback.config;
      const { createExeDevPlugin } = await import("./plugin.js");
      const { definition } = createExeDevPlugin({ env: { EXE_API_KEY: apiKey as string }, runtimeParent: fallback.runtimeParent });
      await definition.setup({ logger: { warn() {}, info() {}, error() {}, debug() {} }, execution: { log() {} } } as never);
      const lease = await definition.onEnvironmentAcquireLease!({ driverKey: "exe-dev", companyId: "c", environmentId: "e", runId: "r", config: withoutToken });
      expect(fallback.emu.control.vmNames()).toEqual([lease.providerLeaseId]);
      await definition.onEnvironmentReleaseLease!({
        driverKey: "exe-dev",
        companyId: "c",
        environmentId: "e",
        providerLeaseId: lease.providerLeaseId,
        leaseMetadata: lease.metadata,
        config: withoutToken,
      });
      expect(fallback.emu.control.vmNames()).toEqual([]);
      await definition.onShutdown?.();
    } finally {
      await fallback.close();
    }
  }, 60_000);
});

describe("probe", () => {
  it("names a repaired key in the summary the host's form shows (its validation warnings are not shown)", async () => {
    const joined = h.emu.credentials.sshPrivateKey!.replace(/\n/g, "");
    const probe = await h.hooks.onEnvironmentProbe({ driverKey: "exe-dev", companyId: "company-1", environmentId: "env-1", config: { ...h.config, sshPrivateKey: joined } });
    expect(probe).toMatchObject({ ok: true, summary: "exe-dev sandbox ready — SSH private key: its line breaks were lost (pasted into a one-line field); restored" });
    expect(await h.emu.leftovers()).toEqual([]);
  }, 60_000);
});

describe("calls and retries", () => {
  it("costs one API call to acquire and rm plus ls to release", async () => {
    const mark = h.emu.requests.mark();
    const lease = await h.acquire();
    expect(await h.calls(mark)).toEqual(["new 200"]);
    const released = h.emu.requests.mark();
    await h.release(lease);
    expect(await h.calls(released)).toEqual(["rm 200", "ls 200"]);
  }, 60_000);

  it("tries a rate-limited create again and makes one VM", async () => {
    h.emu.faults.inject({ kind: "rate-limit", route: "/exec", method: "POST", times: 1, retryAfterSeconds: 0 });
    const mark = h.emu.requests.mark();
    const lease = await h.acquire();
    try {
      expect(await h.calls(mark)).toEqual(["/exec 429", "new 200"]);
      expect(h.emu.control.vmNames()).toEqual([lease.providerLeaseId]);
    } finally {
      h.emu.faults.clear();
      await h.release(lease);
    }
  }, 60_000);

  it("uses its own first launch when the answer to a create is lost mid-launch and the retry finds the name taken", async () => {
    // The first `new` reaches exe.dev, then its connection drops: the VM is still launching (not yet
    // listed) when the look-up and the retry come. exe.dev refuses the retry's name as taken; the
    // provider waits for its own launch instead of failing or making a second VM.
    let emu: Harness["emu"] | undefined;
    let dropped = 0;
    const lossy: typeof fetch = async (input, init) => {
      if (dropped === 0 && String(init?.body).startsWith("new ")) {
        dropped += 1;
        const mark = emu!.requests.mark();
        void fetch(input, init).catch(() => undefined);
        while (!emu!.requests.list({ since: mark, protocol: "http", includeRunning: true }).some((r) => r.notes.command === "new")) await new Promise((resolve) => setTimeout(resolve, 20));
        throw new TypeError("fetch failed", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
      }
      return fetch(input, init);
    };
    const slow = await startHarness(
      { newDelayMs: 4_000 },
      { apiFor: (config: ExeDevConfig) => createExeDevApi({ apiUrl: normalizeApiUrl(config.apiUrl), apiKey: apiKeyOf(config, {})!, fetch: lossy }) },
    );
    emu = slow.emu;
    try {
      const mark = slow.emu.requests.mark();
      const lease = await slow.acquire();
      expect(dropped).toBe(1);
      expect(slow.emu.control.vmNames()).toEqual([lease.providerLeaseId]);
      const calls = await slow.calls(mark);
      expect(calls.filter((call) => call === "new 200")).toHaveLength(1);
      expect((await slow.sh(lease, "echo up")).stdout).toBe("up\n");
      await slow.release(lease);
      expect(await slow.emu.leftovers()).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 120_000);

  it("looks for a create that timed out at exe.dev before trying again, and gives up with no VM left", async () => {
    const slow = await startHarness({ newDelayMs: 2_000, commandTimeoutMs: 100 });
    try {
      const mark = slow.emu.requests.mark();
      const failure = await slow.acquire().then(
        () => "acquired",
        (error: Error) => error.message,
      );
      expect(failure).toMatch(/exe\.dev new failed: HTTP 504 .*command timed out/);
      const calls = await slow.calls(mark);
      expect(calls.slice(0, 3)).toEqual(["new 504", "ls 200", "new 504"]);
      expect(await slow.emu.leftovers()).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 60_000);
});

describe("cp's answer", () => {
  /** An exe.dev that answers each command line with `answers[command word]`, recording the command lines. */
  function vendor(answers: Record<string, unknown>) {
    const commands: string[] = [];
    const fetch = (async (_url: string | URL | Request, init?: RequestInit) => {
      const command = String(init?.body);
      commands.push(command);
      return new Response(JSON.stringify(answers[command.split(" ")[0]!]), { status: 200, headers: { "content-type": "application/json" } });
    }) as typeof globalThis.fetch;
    return { api: createExeDevApi({ apiUrl: "https://exe.example/exec", apiKey: "exe0.t.t", fetch }), commands };
  }
  const request = { source: "pc-0123456789abcdef-abcdef0a", name: "paperclip-0a1b2c-vcopy" };

  it("names the copy's SSH destination (exe.dev's cp handler writes {name, state, source, ssh, elapsed}), so no ls follows", async () => {
    const { api, commands } = vendor({ cp: { name: request.name, state: "starting", source: request.source, ssh: `${request.name}.exe.xyz`, elapsed: 1.5 } });
    expect(await copyOwnVm(api, request)).toEqual({ name: request.name, sshDest: `${request.name}.exe.xyz`, sshPort: undefined, status: "starting", tags: [] });
    expect(commands.map((line) => line.split(" ")[0])).toEqual(["cp"]);
  });

  it("looks the copy up with ls when the answer names no destination, or another VM", async () => {
    const listed = { vms: [{ vm_name: request.name, ssh_dest: `${request.name}.exe.xyz`, status: "running" }] };
    for (const cp of [{ name: request.name, state: "starting" }, { name: "someone-else", ssh: "someone-else.exe.xyz" }, undefined]) {
      const { api, commands } = vendor({ cp, ls: listed });
      expect(await copyOwnVm(api, request), JSON.stringify(cp)).toMatchObject({ name: request.name, sshDest: `${request.name}.exe.xyz`, status: "running" });
      expect(commands.map((line) => line.split(" ")[0])).toEqual(["cp", "ls"]);
    }
  });
});
