// Every validation rule with its exact message, through the plugin's validate hook as the host calls
// it; the key's paste mistakes named; VM names that exe.dev takes.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { KEY_PROBLEMS, KEY_REPAIRS } from "@paperclip-sandbox/kit";
import { vmNameProblem } from "@paperclip-sandbox/emulator-exe-dev";
import { KEY_AND_FILE, KEY_REQUIRED, normalizeApiUrl } from "./config.js";
import { createExeDevPlugin } from "./plugin.js";
import { isVmName, labelsOf, tagOf, tagsOf, vmNameFor } from "./vm-names.js";

const dir = mkdtempSync(join(tmpdir(), "exe-config-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", join(dir, "id")]);
execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "a passphrase", "-C", "t", "-f", join(dir, "enc")]);
const key = readFileSync(join(dir, "id"), "utf8");
const publicKey = readFileSync(join(dir, "id.pub"), "utf8");
const encryptedKey = readFileSync(join(dir, "enc"), "utf8");

const { definition } = createExeDevPlugin({ env: {} });
const validate = (config: Record<string, unknown>) => definition.onEnvironmentValidateConfig!({ driverKey: "exe-dev", config });
const base = { apiKey: "exe0.test.test", sshPrivateKey: key };

describe("validation", () => {
  it("accepts a minimal config and fills the defaults", async () => {
    const result = await validate(base);
    expect(result).toMatchObject({ ok: true, errors: [], warnings: [] });
    expect(result.normalizedConfig).toMatchObject({ apiUrl: "https://exe.dev/exec", sshPort: 22, namePrefix: "paperclip", env: [], tags: [], timeoutMs: 300_000, reuseLease: false });
  });

  it.each([
    ["Windows line ends", key.replace(/\n/g, "\r\n"), KEY_REPAIRS.crlf],
    ["a missing final newline", key.trimEnd(), KEY_REPAIRS.finalNewline],
    ["escaped \\n", key.replace(/\n/g, "\\n"), KEY_REPAIRS.escapedNewlines],
  ])("accepts a key pasted with %s, naming the repair", async (_what, pasted, repair) => {
    expect(await validate({ ...base, sshPrivateKey: pasted })).toMatchObject({ ok: true, warnings: [`SSH private key: ${repair}`] });
  });

  it.each([
    ["a public key", { sshPrivateKey: publicKey }, `SSH private key: ${KEY_PROBLEMS.publicKey}`],
    ["an encrypted key", { sshPrivateKey: encryptedKey }, `SSH private key: ${KEY_PROBLEMS.encrypted}`],
    ["a truncated key", { sshPrivateKey: key.split("\n").slice(0, 2).join("\n") }, `SSH private key: ${KEY_PROBLEMS.noEnd}`],
    ["no key at all", { sshPrivateKey: undefined }, KEY_REQUIRED],
    ["a key and a key file", { sshIdentityFile: "/home/paperclip/.ssh/id_ed25519" }, KEY_AND_FILE],
    ["a relative key file", { sshPrivateKey: undefined, sshIdentityFile: "id_ed25519" }, "SSH identity file: must be an absolute POSIX path (starting with /)"],
    ["a prefix with capitals", { namePrefix: "Paperclip" }, "VM name prefix: must start with a lower-case letter and hold lower-case letters and digits, with single hyphens between them"],
    ["a prefix ending in a hyphen", { namePrefix: "paperclip-" }, "VM name prefix: must start with a lower-case letter and hold lower-case letters and digits, with single hyphens between them"],
    ["a long prefix", { namePrefix: "a".repeat(25) }, "VM name prefix: must be at most 24 characters"],
    ["a bad tag", { tags: ["ci", "Prod"] }, "Tags, item 2: must start with a lower-case letter and hold only a-z, 0-9, _ and -"],
    ["an env item without =", { env: ["FOO"] }, "Environment, item 1: must be KEY=VALUE"],
    ["an env name starting with a digit", { env: ["1X=y"] }, "Environment, item 1: must start with a variable name (letters, digits, _; not a digit first)"],
    ["a memory size without a number", { memory: "lots" }, "Memory: must be a size such as 4, 4GB or 8GiB (a bare number is GiB)"],
    ["an SSH port out of range", { sshPort: 70_000 }, "SSH port: must be at most 65535"],
    ["a setup script over 10 KiB", { setupScript: "x".repeat(10_241) }, "Setup script: must be at most 10 KiB (exe.dev's limit)"],
    ["an http API URL off loopback", { apiUrl: "http://exe.example/exec" }, "API URL: must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)"],
    ["a template ref Paperclip did not capture", { templateRef: "golden-vm" }, "Custom image template: must be a template Paperclip captured (pc-, 16 hex digits, a dash and 8 more)"],
    [
      "a template name exe.dev cannot hold as a VM (ending in -<digits>)",
      { templateRef: "pc-0123456789abcdef-01234567" },
      "Custom image template: must be an exe.dev VM name (5 to 63 lower-case letters and digits with single hyphens, starting with a letter, not ending in a hyphen and digits)",
    ],
  ])("refuses %s", async (_what, config, message) => {
    expect(await validate({ ...base, ...config })).toMatchObject({ ok: false, errors: [message] });
  });

  it("leaves a secret reference (not key material) to the lease, and warns without any API token", async () => {
    expect(await validate({ ...base, sshPrivateKey: "3f2b8a4e-6c1d-4b7a-9e0f-1a2b3c4d5e6f" })).toMatchObject({ ok: true, errors: [] });
    expect(await validate({ sshPrivateKey: key })).toMatchObject({ ok: true, warnings: ["no API token: set API token, or EXE_API_KEY in the plugin worker's environment"] });
  });

  it("normalises any base URL to the /exec endpoint", () => {
    expect(normalizeApiUrl("https://exe.dev")).toBe("https://exe.dev/exec");
    expect(normalizeApiUrl("https://exe.dev/")).toBe("https://exe.dev/exec");
    expect(normalizeApiUrl("https://proxy.example/exe/")).toBe("https://proxy.example/exe/exec");
    expect(normalizeApiUrl("https://exe.dev/exec?x=1")).toBe("https://exe.dev/exec");
  });
});

describe("VM names and tags", () => {
  it("never ends a name in -<digits>, whatever the nonce, and every name passes exe.dev's rules", () => {
    for (const nonce of ["12345678", "00000000ab", "deadbeef", "9"]) {
      const name = vmNameFor("paperclip", "env-1", nonce);
      expect(name).toMatch(/^paperclip-[0-9a-f]{6}-v[0-9a-f]{1,8}$/);
      expect(isVmName(name)).toBe(true);
      expect(vmNameProblem(name)).toBeUndefined();
    }
    expect(vmNameFor("a-b", "env-1", "1").length).toBeGreaterThanOrEqual(5);
    expect(isVmName("paperclip-run-123")).toBe(false);
  });

  it("carries every label value through exe.dev's tag rule and back, odd characters included", () => {
    const labels = { "paperclip-provider": "exe-dev", "paperclip-company": "0f1e2d3c-aaaa-bbbb-cccc-123456789abc", "paperclip-environment": "env.with_odd chars", "paperclip-run": "run-1" };
    const tags = tagsOf(labels);
    for (const tag of tags) expect(tag).toMatch(/^[a-z][a-z0-9_-]*$/);
    expect(tags).toContain("paperclip-provider_exe-dev");
    expect(labelsOf([...tags, "ci", "paperclip"])).toEqual(labels);
    expect(tagOf("paperclip-run", "x616263")).not.toBe(tagOf("paperclip-run", "abc"));
  });
});
