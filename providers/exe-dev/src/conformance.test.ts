// The exe-dev provider through the whole suite: the built worker, forked as the host does, against
// the exe.dev emulator (its HTTPS API, and a real OpenSSH server per VM whose sessions run in the
// VM's bubblewrap jail).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";
import { startExeDevEmulator } from "@paperclip-sandbox/emulator-exe-dev";
import { KEY_AND_FILE, KEY_REQUIRED } from "./config.js";
import { listLeases } from "./plugin.js";

// The token may also copy and tag VMs: the custom-image cases (capture, start from a template) run.
const emu = await startExeDevEmulator({ tokenCmds: ["new", "ls", "rm", "cp", "tag", "whoami"] });
// The workers keep their SSH state (key files, host keys per environment) under their TMPDIR: one of the test's own.
const workerTmp = mkdtempSync(join(tmpdir(), "exe-conf-"));
afterAll(async () => {
  await emu.close();
  rmSync(workerTmp, { recursive: true, force: true });
}, 60_000);

const config = { apiKey: emu.credentials.apiKey!, apiUrl: emu.url, sshPrivateKey: emu.credentials.sshPrivateKey!, timeoutMs: 60_000 };
const exact = (message: string) => new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);

// Both paths: every command over the kit's command channel, and every command an SSH channel of its own.
for (const channel of ["always", "off"] as const) {
  describeConformance({
    name: `exe-dev (emulator: HTTPS API, OpenSSH per VM, command channel ${channel})`,
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "exe-dev",
    config,
    // The worker trusts the emulator's self-signed certificate as a host would trust exe.dev's.
    workerEnv: { NODE_EXTRA_CA_CERTS: emu.env.NODE_EXTRA_CA_CERTS!, TMPDIR: workerTmp, PAPERCLIP_SANDBOX_COMMAND_CHANNEL: channel },
    invalidConfigs: [
      { config: { apiKey: config.apiKey, apiUrl: config.apiUrl }, error: exact(KEY_REQUIRED) },
      { config: { ...config, sshIdentityFile: "/root/.ssh/id_ed25519" }, error: exact(KEY_AND_FILE) },
      { config: { ...config, sshPrivateKey: emu.credentials.sshPublicKey! }, error: /^SSH private key: is a public key/ },
      { config: { ...config, namePrefix: "Paperclip" }, error: /^VM name prefix: must start with a lower-case letter/ },
      { config: { ...config, tags: ["ok", "9bad"] }, error: /^Tags, item 2: must start with a lower-case letter/ },
      { config: { ...config, apiUrl: "http://exe.example/exec" }, error: /^API URL: must use https/ },
      { config: { ...config, templateRef: "golden-vm" }, error: /^Custom image template: must be a template Paperclip captured/ },
      { config: { ...config, templateRef: "pc-0123456789abcdef-abcdef0a", image: "ubuntu:24.04" }, error: /^Image: not with Custom image template/ },
    ],
    reuseConfig: { ...config, reuseLease: true },
    leftovers: () => emu.leftovers(),
    // From the test process, which does not trust the emulator's certificate: its plain-http endpoint.
    labelsOf: async (providerLeaseId, leaseConfig) =>
      (await listLeases({ ...leaseConfig, apiUrl: emu.endpoints.http }, { env: {} })).find((lease) => lease.providerLeaseId === providerLeaseId)?.labels,
    faults: {
      // What follows the create is the first SSH session (the workspace): it breaks (with the channel,
      // the channel's own start comes first and falls back to that session).
      failAfterCreate: async () => emu.control.failSessions(channel === "always" ? 2 : 1),
      transient: async (kind: "429" | "503", count: number) =>
        void emu.faults.inject(kind === "429" ? { kind: "rate-limit", route: "/exec", times: count, retryAfterSeconds: 1 } : { kind: "status", status: 503, route: "/exec", times: count }),
      reset: async () => {
        emu.faults.clear();
        emu.control.failSessions(0);
      },
    },
    unboundedExpiry: "exe.dev VMs live until they are deleted: the provider can bound none, so the host fails closed",
  });
}
