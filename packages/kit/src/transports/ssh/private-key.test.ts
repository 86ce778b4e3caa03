// Each paste mistake of an SSH private key, recognised and named, with real keys from ssh-keygen.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { checkPrivateKey, KEY_PROBLEMS, KEY_REPAIRS } from "./private-key.js";
import { forgetKnownHost, knownHostsLinesFor, knownHostsName, readKnownHosts, seedKnownHost } from "./known-hosts.js";
import { writeFileSync } from "node:fs";

const dir = mkdtempSync(join(tmpdir(), "kit-ssh-key-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const keygen = (name: string, ...args: string[]) => {
  execFileSync("ssh-keygen", ["-q", "-C", "test", "-f", join(dir, name), ...args]);
  return { privateKey: readFileSync(join(dir, name), "utf8"), publicKey: readFileSync(join(dir, `${name}.pub`), "utf8") };
};
const plain = keygen("plain", "-t", "ed25519", "-N", "");
const encrypted = keygen("encrypted", "-t", "ed25519", "-N", "correct horse");
const pem = keygen("pem", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "");
const pemEncrypted = keygen("pem-enc", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "correct horse");

describe("checkPrivateKey", () => {
  it("passes a key as ssh-keygen wrote it, unchanged", () => {
    expect(checkPrivateKey(plain.privateKey)).toEqual({ ok: true, key: plain.privateKey, format: "openssh", repaired: [] });
    expect(checkPrivateKey(pem.privateKey)).toMatchObject({ ok: true, key: pem.privateKey, format: "pem", repaired: [] });
  });

  it.each<[string, () => string, string[]]>([
    ["Windows line ends", () => plain.privateKey.replace(/\n/g, "\r\n"), [KEY_REPAIRS.crlf]],
    ["a missing final newline", () => plain.privateKey.trimEnd(), [KEY_REPAIRS.finalNewline]],
    ["escaped \\n on one line (JSON, .env)", () => plain.privateKey.trimEnd().replace(/\n/g, "\\n"), [KEY_REPAIRS.escapedNewlines, KEY_REPAIRS.finalNewline]],
    ["escaped \\n with a final escape", () => plain.privateKey.replace(/\n/g, "\\n"), [KEY_REPAIRS.escapedNewlines]],
    ["indented lines", () => plain.privateKey.replace(/^/gm, "  "), [KEY_REPAIRS.indentation]],
    ["line breaks lost in a one-line field", () => plain.privateKey.replace(/\n/g, ""), [KEY_REPAIRS.joinedLines]],
    ["line breaks turned into spaces", () => plain.privateKey.trimEnd().replace(/\n/g, " "), [KEY_REPAIRS.joinedLines]],
  ])("repairs and names %s", (_what, damage, repaired) => {
    expect(checkPrivateKey(damage())).toEqual({ ok: true, key: plain.privateKey, format: "openssh", repaired });
  });

  it.each<[string, () => string, string]>([
    ["a public key", () => plain.publicKey, KEY_PROBLEMS.publicKey],
    ["an RSA public key", () => pem.publicKey, KEY_PROBLEMS.publicKey],
    ["an OpenSSH key encrypted with a passphrase", () => encrypted.privateKey, KEY_PROBLEMS.encrypted],
    ["a PEM key encrypted with a passphrase", () => pemEncrypted.privateKey, KEY_PROBLEMS.encrypted],
    ["an encrypted PKCS#8 key", () => "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n", KEY_PROBLEMS.encrypted],
    ["a PuTTY key", () => "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\n", KEY_PROBLEMS.putty],
    ["a key cut off before its END line", () => plain.privateKey.split("\n").slice(0, 3).join("\n"), KEY_PROBLEMS.noEnd],
    [
      "a body cut short",
      () =>
        plain.privateKey
          .split("\n")
          .filter((_, i, all) => i === 0 || i === 1 || i === all.length - 2)
          .join("\n"),
      KEY_PROBLEMS.truncatedBody,
    ],
    ["mismatched armor", () => plain.privateKey.replace("END OPENSSH", "END RSA"), KEY_PROBLEMS.labelMismatch],
    ["an edited body", () => plain.privateKey.replace(/\n([A-Za-z0-9+/]{10})/, "\n$1 !!"), KEY_PROBLEMS.badBody],
    ["text that is no key", () => "my-secret-token", KEY_PROBLEMS.noBegin],
    ["nothing", () => "  \n", KEY_PROBLEMS.empty],
  ])("refuses %s, naming it", (_what, paste, problem) => {
    expect(checkPrivateKey(paste())).toEqual({ ok: false, problem });
  });
});

describe("known_hosts files", () => {
  it("finds, forgets and seeds entries by destination, leaving other hosts alone", async () => {
    const file = join(dir, "known_hosts");
    const line = (host: string) => `${host} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey${host.length}`;
    writeFileSync(file, `${line("[127.0.0.1]:2201")}\n${line("vm.exe.xyz")}\n${line("[127.0.0.1]:2202")}\n`, { mode: 0o600 });
    expect(knownHostsName("vm.exe.xyz", 22)).toBe("vm.exe.xyz");
    expect(knownHostsLinesFor(await readKnownHosts(file), "127.0.0.1", 2201)).toEqual([line("[127.0.0.1]:2201")]);
    await forgetKnownHost(file, "127.0.0.1", 2201);
    expect(await readKnownHosts(file)).toBe(`${line("vm.exe.xyz")}\n${line("[127.0.0.1]:2202")}\n`);
    await seedKnownHost(file, "127.0.0.1", 2201, [line("[127.0.0.1]:2201"), line("[127.0.0.1]:9999")]);
    expect(knownHostsLinesFor(await readKnownHosts(file), "127.0.0.1", 2201)).toEqual([line("[127.0.0.1]:2201")]);
    expect(knownHostsLinesFor(await readKnownHosts(file), "127.0.0.1", 9999)).toEqual([]);
  });
});
