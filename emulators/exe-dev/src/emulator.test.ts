// The exe.dev emulator as a client sees it: the /exec API's statuses and bodies, token rules, and
// the per-VM OpenSSH servers reached with the real `ssh` client.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INVALID_NAME_MESSAGE, startExeDevEmulator, TRAILING_DIGITS_MESSAGE } from "./index.js";

const execFileAsync = promisify(execFile);
type Emu = Awaited<ReturnType<typeof startExeDevEmulator>>;

let emu: Emu;
let dir: string;
let keyFile: string;
let api: (command: string, token?: string) => Promise<{ status: number; body: string; json: () => any }>;

beforeAll(async () => {
  emu = await startExeDevEmulator({ rateLimit: { requests: 1000, windowMs: 60_000 } });
  dir = await mkdtemp(join(tmpdir(), "exe-emu-test-"));
  keyFile = join(dir, "id");
  await writeFile(keyFile, emu.credentials.sshPrivateKey!, { mode: 0o600 });
  api = async (command, token = emu.credentials.apiKey!) => {
    const response = await fetch(emu.endpoints.http!, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: command });
    const body = await response.text();
    return { status: response.status, body, json: () => JSON.parse(body.trim().split("\n").pop()!) };
  };
}, 60_000);

afterAll(async () => {
  await emu?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 60_000);

/** Runs a command on a VM with the real ssh client (fresh connection each time). */
const ssh = (port: number, user: string, command: string, opts: { stdin?: string; knownHosts?: string } = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn("ssh", [
      "-F",
      "none",
      "-o",
      "LogLevel=ERROR",
      "-i",
      keyFile,
      "-o",
      "IdentitiesOnly=yes",
      "-o",
      "BatchMode=yes",
      "-o",
      `UserKnownHostsFile=${opts.knownHosts ?? join(dir, "known_hosts")}`,
      "-o",
      "StrictHostKeyChecking=accept-new",
      "-o",
      "GlobalKnownHostsFile=/dev/null",
      "-p",
      String(port),
      "-l",
      user,
      "127.0.0.1",
      command,
    ]);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.stdin.end(opts.stdin ?? "");
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });

describe("the /exec API", () => {
  it("answers 401 without a bearer token, with a token that is not exe0, and with one signed by an unregistered key", async () => {
    const none = await fetch(emu.endpoints.http!, { method: "POST", body: "whoami" });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    expect(await none.json()).toEqual({ error: "missing or invalid Authorization header" });
    expect((await api("whoami", "exe1.opaque")).json()).toEqual({ error: "invalid token format: missing exe0. prefix" });
    const stranger = await startExeDevEmulator();
    try {
      const foreign = await api("whoami", stranger.credentials.apiKey!);
      expect([foreign.status, foreign.json()]).toEqual([401, { error: "invalid token" }]);
    } finally {
      await stranger.close();
    }
  }, 60_000);

  it("refuses an expired token and a token whose payload was changed after signing", async () => {
    const expired = await api("whoami", emu.control.mintToken({ exp: Math.floor(Date.now() / 1000) - 10 }));
    expect([expired.status, expired.json()]).toEqual([401, { error: "invalid token: token has expired" }]);
    const [prefix, , sig] = emu.control.mintToken({ cmds: ["whoami"] }).split(".");
    const widened = `${prefix}.${Buffer.from('{"cmds":["whoami","rm"]}').toString("base64url")}.${sig}`;
    expect((await api("whoami", widened)).json()).toEqual({ error: "invalid token" });
  });

  it("accepts a token made the documented way, with ssh-keygen -Y sign", async () => {
    const permissions = '{"cmds":["whoami"]}';
    const signed = await new Promise<string>((resolve, reject) => {
      const child = spawn("ssh-keygen", ["-Y", "sign", "-f", keyFile, "-n", "v0@exe.dev"]);
      let out = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`ssh-keygen ${code}`))));
      child.stdin.end(permissions);
    });
    const sigblob = Buffer.from(signed.split("\n").slice(1, -2).join(""), "base64").toString("base64url");
    const token = `exe0.${Buffer.from(permissions).toString("base64url")}.${sigblob}`;
    const whoami = await api("whoami", token);
    expect(whoami.status).toBe(200);
    expect(whoami.json().ssh_keys[0].fingerprint).toBe(emu.control.accountKey.fingerprint);
  });

  it("answers 403 for a command the token does not list, and lets the default cmds through", async () => {
    const noRm = emu.control.mintToken({ cmds: ["new", "ls", "whoami"] });
    const denied = await api("rm some-vm", noRm);
    expect([denied.status, denied.json()]).toEqual([403, { error: "command not allowed by token permissions" }]);
    const defaults = emu.control.mintToken({});
    expect((await api("ls --json", defaults)).status).toBe(200);
    expect((await api("rm some-vm", defaults)).status).toBe(403);
  });

  it("answers 400, 404, 405 and 413 as exe.dev does", async () => {
    expect((await api("   ")).json()).toEqual({ error: "missing command in request body" });
    const unbalanced = await api("new --name='x");
    expect([unbalanced.status, unbalanced.json()]).toEqual([400, { error: "invalid command syntax" }]);
    const unknown = await api("frobnicate");
    expect([unknown.status, unknown.json()]).toEqual([404, { error: "unknown command" }]);
    const get = await fetch(emu.endpoints.http!, { headers: { authorization: `Bearer ${emu.credentials.apiKey}` } });
    expect([get.status, get.headers.get("allow")]).toEqual([405, "POST"]);
    const big = await api(`ls ${"a".repeat(70 * 1024)}`);
    expect([big.status, big.json()]).toEqual([413, { error: "request body exceeds 64KB limit" }]);
  });

  it("refuses VM names by exe.dev's rules with 422, a name ending in -<digits> included", async () => {
    const digits = await api("new --json --name=paperclip-run-123");
    expect([digits.status, digits.json()]).toEqual([422, { error: TRAILING_DIGITS_MESSAGE }]);
    for (const bad of ["ab", "9lives", "has--double", "UPPER-case", "trailing-"]) {
      const answer = await api(`new --json --name=${bad}`);
      expect([bad, answer.status, answer.json()]).toEqual([bad, 422, { error: INVALID_NAME_MESSAGE }]);
    }
    const flag = await api("new --bogus");
    expect([flag.status, flag.json()]).toEqual([422, { error: "flag parsing error: flag provided but not defined: -bogus" }]);
  });

  it("serves the API over TLS with the emulator's certificate", async () => {
    const url = new URL(emu.url);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: "POST", ca: emu.caPem, headers: { authorization: `Bearer ${emu.credentials.apiKey}` } }, (res) => {
        let body = "";
        res.on("data", (chunk) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode!, body }));
      });
      req.on("error", reject);
      req.end("whoami");
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).email).toBe("emulator@example.com");
  });
});

describe("VMs over SSH", () => {
  it("creates a VM whose SSH sessions run in its jail, lists it by name and tag, and deletes it", async () => {
    const created = await api("new --json --name=paperclip-emu-vma --tag=paperclip --tag=pc-env_e1 --env=GREETING=hi --cpu=1 --memory=2GB");
    expect([created.status, created.body]).toEqual([200, expect.any(String)]);
    const vm = created.json();
    expect(vm).toMatchObject({
      vm_name: "paperclip-emu-vma",
      ssh_dest: expect.stringMatching(/^[a-z_][a-z0-9_-]*@127\.0\.0\.1$/),
      ssh_port: emu.control.sshHost("paperclip-emu-vma")!.port,
      https_url: "https://paperclip-emu-vma.exe.xyz",
    });
    const [user] = vm.ssh_dest.split("@");
    const run = await ssh(vm.ssh_port, user, 'echo "$GREETING from $(id -u) in $PWD"; cat; echo oops >&2; exit 3', { stdin: "piped" });
    expect(run).toEqual({ code: 3, stdout: "hi from 1000 in /home/sandbox\npiped", stderr: "oops\n" });
    const byTag = (await api("ls --json pc-env_e1")).json();
    expect(byTag.vms.map((v: { vm_name: string; tags: string[] }) => [v.vm_name, v.tags])).toEqual([["paperclip-emu-vma", ["paperclip", "pc-env_e1"]]]);
    const removed = await api("rm paperclip-emu-vma --json");
    expect([removed.status, removed.json()]).toEqual([200, { deleted: ["paperclip-emu-vma"], failed: [] }]);
    expect((await api("ls --json paperclip-emu-vma")).json()).toEqual({ vms: [] });
    const again = await api("rm paperclip-emu-vma --json");
    expect(again.status).toBe(200);
    expect(
      again.body
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line)),
    ).toEqual([{ error: 'VM "paperclip-emu-vma" not found' }, { deleted: [], failed: ["paperclip-emu-vma"] }]);
    expect(await emu.leftovers()).toEqual([]);
  }, 60_000);

  it("copies a VM with its disk (cp): files, env and tags come along, the size can change, the source keeps running; tag adds and removes tags", async () => {
    const token = emu.control.mintToken({ cmds: ["new", "ls", "rm", "cp", "tag"] });
    const call = (command: string) => api(command, token);
    const made = (await call("new --json --name=paperclip-emu-src --tag=keep --env=GREETING=hi --cpu=1 --memory=2GB")).json();
    const [user] = made.ssh_dest.split("@");
    expect((await ssh(made.ssh_port, user, 'echo on-disk > "$HOME/marker" && mkdir -p /tmp/t && echo tmp > /tmp/t/f')).code).toBe(0);

    const copied = await call("cp --json paperclip-emu-src paperclip-emu-dst --cpu=2");
    expect([copied.status, copied.json()]).toEqual([
      200,
      { name: "paperclip-emu-dst", state: "starting", source: "paperclip-emu-src", ssh: made.ssh_dest, ssh_port: expect.any(Number), elapsed: expect.any(Number) },
    ]);
    const listed = (await call("ls --json paperclip-emu-dst")).json().vms[0];
    expect(listed).toMatchObject({ vm_name: "paperclip-emu-dst", status: "running", tags: ["keep"] });
    // cp names the endpoint ls lists (exe.dev: BoxDest of the name in both answers).
    expect([copied.json().ssh, copied.json().ssh_port]).toEqual([listed.ssh_dest, listed.ssh_port]);
    expect(listed.ssh_port).not.toBe(made.ssh_port);
    const read = await ssh(listed.ssh_port, user, 'cat "$HOME/marker" /tmp/t/f; echo "$GREETING"', { knownHosts: join(dir, "kh-copy") });
    expect(read).toEqual({ code: 0, stdout: "on-disk\ntmp\nhi\n", stderr: "" });
    // The copy is a disk of its own: a change in it is not in the source, which still runs.
    expect((await ssh(listed.ssh_port, user, 'echo changed > "$HOME/marker"', { knownHosts: join(dir, "kh-copy") })).code).toBe(0);
    expect((await ssh(made.ssh_port, user, 'cat "$HOME/marker"')).stdout).toBe("on-disk\n");

    const bare = await call("cp paperclip-emu-src paperclip-emu-bare --copy-tags=false --json");
    expect(bare.status).toBe(200);
    expect((await call("ls --json paperclip-emu-bare")).json().vms[0].tags).toBeUndefined();
    expect((await call("tag --json paperclip-emu-bare pc-a pc_b")).json()).toEqual({ vm_name: "paperclip-emu-bare", tags: ["pc-a", "pc_b"] });
    expect((await call("tag paperclip-emu-bare pc-a")).json()).toEqual({ error: 'tag "pc-a" already exists on paperclip-emu-bare' });
    expect((await call("tag -d paperclip-emu-bare pc-a --json")).json()).toEqual({ vm_name: "paperclip-emu-bare", tags: ["pc_b"] });
    expect((await call("tag paperclip-emu-bare Bad")).json()).toEqual({ error: 'invalid tag name "Bad": must match [a-z][a-z0-9_-]*' });

    const errors = await Promise.all([
      call("cp --json"),
      call("cp --json paperclip-emu-none paperclip-emu-x"),
      call("cp --json paperclip-emu-src paperclip-emu-dst"),
      call("cp --json paperclip-emu-src paperclip-emu-123"),
      call("cp --json paperclip-emu-src paperclip-emu-y --image=ubuntu"),
    ]);
    expect(errors.map((answer) => [answer.status, answer.json()])).toEqual([
      [422, { error: "usage: cp <source-vm> [new-name]" }],
      [422, { error: 'vm "paperclip-emu-none" not found' }],
      [422, { error: 'name "paperclip-emu-dst" is not available' }],
      [422, { error: `invalid name: ${TRAILING_DIGITS_MESSAGE}` }],
      [422, { error: "flag parsing error: flag provided but not defined: -image" }],
    ]);
    expect((await api("cp paperclip-emu-src paperclip-emu-z")).status).toBe(403);
    await call("rm paperclip-emu-src paperclip-emu-dst paperclip-emu-bare");
    expect(await emu.leftovers()).toEqual([]);
  }, 120_000);

  it("presents a new host key after a rotation, which ssh refuses against what it recorded", async () => {
    const vm = (await api("new --json --name=paperclip-emu-vmb")).json();
    const [user] = vm.ssh_dest.split("@");
    const knownHosts = join(dir, "kh-rotation");
    expect((await ssh(vm.ssh_port, user, "true", { knownHosts })).code).toBe(0);
    await emu.control.sshHost("paperclip-emu-vmb")!.rotateHostKey();
    const refused = await ssh(vm.ssh_port, user, "touch /tmp/should-not-run", { knownHosts });
    expect(refused.code).toBe(255);
    expect(refused.stderr).toMatch(/REMOTE HOST IDENTIFICATION HAS CHANGED/);
    expect(await readFile(knownHosts, "utf8")).toContain(`[127.0.0.1]:${vm.ssh_port}`);
    await api("rm paperclip-emu-vmb");
  }, 60_000);

  it("runs `ssh -t` commands on a real terminal of the client's size, resized by its window-change, ^C reaching the program", async () => {
    const vm = (await api("new --json --name=paperclip-emu-vmt")).json();
    const [user] = vm.ssh_dest.split("@");
    // The client on a terminal of its own (python's pty), 90x20; once the program is ready the
    // terminal becomes 132x40: ssh sends a window-change; then ^C is typed.
    const client = [
      "import os, pty, struct, fcntl, termios, sys",
      "pid, fd = pty.fork()",
      "if pid == 0:",
      "    os.execvp('sh', ['sh', '-c', 'stty cols 90 rows 20; exec \"$@\"', 'sh'] + sys.argv[1:])",
      "out = b''; resized = False; typed = False",
      "while True:",
      "    try: data = os.read(fd, 4096)",
      "    except OSError: break",
      "    if not data: break",
      "    out += data",
      "    if not resized and b'ready' in out:",
      "        resized = True; fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 132, 0, 0))",
      "    if not typed and b'winch' in out:",
      "        typed = True; os.write(fd, b'\\x03')",
      "_, status = os.waitpid(pid, 0)",
      "sys.stdout.write(out.decode('utf8', 'replace') + 'status=' + str(os.waitstatus_to_exitcode(status)))",
    ].join("\n");
    const remote = `printf 'term %s tty %s size %s\\n' "$TERM" "$(test -t 0 && echo yes)" "$(stty size)"; trap 'printf "winch %s\\n" "$(stty size)"' WINCH; echo ready; while :; do sleep 0.1; done`;
    const run = await new Promise<string>((resolve) => {
      const child = spawn(
        "python3",
        [
          "-c",
          client,
          "ssh",
          "-tt",
          "-F",
          "none",
          "-o",
          "LogLevel=ERROR",
          "-i",
          keyFile,
          "-o",
          "IdentitiesOnly=yes",
          "-o",
          "BatchMode=yes",
          "-o",
          `UserKnownHostsFile=${join(dir, "known_hosts")}`,
          "-o",
          "StrictHostKeyChecking=accept-new",
          "-o",
          "GlobalKnownHostsFile=/dev/null",
          "-p",
          String(vm.ssh_port),
          "-l",
          user,
          "127.0.0.1",
          remote,
        ],
        { env: { ...process.env, TERM: "xterm-256color" } },
      );
      let stdout = "";
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.on("close", () => resolve(stdout));
    });
    expect(run).toContain("term xterm-256color tty yes size 20 90");
    expect(run).toContain("winch 40 132");
    // ^C: SIGINT to the program, which the session reports as 128 + 2.
    expect(run).toMatch(/status=130$/);
    await api("rm paperclip-emu-vmt");
  }, 60_000);

  it("answers 504 when a command outlives its deadline, and 429 past the rate limit", async () => {
    const slow = await startExeDevEmulator({ newDelayMs: 5_000, commandTimeoutMs: 200, rateLimit: { requests: 2, windowMs: 60_000 } });
    try {
      const call = (command: string) => fetch(slow.endpoints.http!, { method: "POST", headers: { authorization: `Bearer ${slow.credentials.apiKey}` }, body: command });
      const timedOut = await call("new --json --name=paperclip-slow-vm");
      expect([timedOut.status, await timedOut.json()]).toEqual([504, { error: "command timed out" }]);
      expect(await slow.leftovers()).toEqual([]);
      expect((await call("whoami")).status).toBe(200);
      const limited = await call("whoami");
      expect([limited.status, await limited.json()]).toEqual([429, { error: "rate limit exceeded" }]);
    } finally {
      await slow.close();
    }
  }, 60_000);
});

// ssh-keygen must exist for the emulator itself; a missing one is a setup error, not a skip.
void execFileAsync;
