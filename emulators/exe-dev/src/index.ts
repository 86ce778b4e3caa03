import { execFile } from "node:child_process";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  createRouter,
  HttpError,
  runEmulator,
  type EmulatorDefinition,
  type EmulatorKitContext,
  type EmulatorParts,
  type HttpContext,
  type RunningEmulator,
  type SshHost,
} from "@paperclip-sandbox/emulator-kit";
import { createSandboxBackend } from "@paperclip-sandbox/sandbox-backend";
import { isImplemented, resolveCommandName, runCommand } from "./commands.js";
import { ShlexError, shlexSplit } from "./shlex.js";
import { parseOpenSshPrivateKey, parsePublicKeyLine, type Ed25519Key } from "./sshsig.js";
import { checkClaims, mintToken, parseToken, TokenError, tokenAllows, verifyToken, type TokenPermissions } from "./tokens.js";
import { createFleet } from "./vms.js";

export { mintToken, parseToken, DEFAULT_TOKEN_CMDS, type TokenPermissions } from "./tokens.js";
export { parseOpenSshPrivateKey, parsePublicKeyLine, type Ed25519Key } from "./sshsig.js";
export { vmNameProblem, INVALID_NAME_MESSAGE, TRAILING_DIGITS_MESSAGE } from "./names.js";

const execFileAsync = promisify(execFile);

export interface ExeDevEmulatorOptions {
  /** Loopback port of the API (default 0: any free port). Every VM's SSH gets a port of its own. */
  port?: number;
  /** Parent of the emulator's state directory (jails, sshd files); keep it short (socket paths). */
  stateParentDir?: string;
  /** The commands the token in `credentials.apiKey` may run (default `new`, `ls`, `rm`, `whoami`). */
  tokenCmds?: string[];
  /** More public keys (authorized_keys lines, ssh-ed25519) registered with the account. */
  sshPublicKeys?: string[];
  /** Per signing key: more than `requests` commands within `windowMs` answer 429. Default: no limit. */
  rateLimit?: { requests: number; windowMs: number };
  /** How long `new` takes before creating the VM (default 0); past the command timeout it answers 504. */
  newDelayMs?: number;
  /** exe.dev's per-command limit (default 30000 ms). */
  commandTimeoutMs?: number;
  /** How long a deleted VM stays listed (status "stopping") after `rm` (default 0). */
  deleteLingerMs?: number;
  /** Accept names ending in `-<digits>` (default false: refused, as observed at exe.dev). */
  trailingDigitsAllowed?: boolean;
  /** VMs the account may have at once (default 20). */
  maxVms?: number;
  /** A jail never outlives this (default 6 h), so a crashed emulator leaks nothing for long. */
  maxLifetimeMs?: number;
  email?: string;
}

/** Run-time switches for tests: tokens, host keys, dropped connections. */
export interface ExeDevControl {
  /** The account's key (signs tokens, logs in to VMs). */
  readonly accountKey: Ed25519Key;
  /** A token the documented way, signed by the account key. */
  mintToken(permissions?: TokenPermissions): string;
  /** A VM's SSH endpoint, while it exists. */
  sshHost(vm: string): SshHost | undefined;
  /** The names of the VMs that exist now. */
  vmNames(): string[];
  /** sshd's recent error lines. */
  sshLog(): string[];
  /** The next `count` SSH sessions (any VM) end at once with status 255 and no output, as a broken VM would. */
  failSessions(count: number): void;
}

const API_NAMESPACE = "v0@exe.dev";
const MAX_BODY = 64 * 1024;

async function startExeDevParts(kit: EmulatorKitContext, options: ExeDevEmulatorOptions): Promise<EmulatorParts & { control: ExeDevControl }> {
  const stateDir = await mkdtemp(join(options.stateParentDir ?? tmpdir(), "exe-"));
  kit.onClose(() => rm(stateDir, { recursive: true, force: true }));
  // Traversable (not listable): as root, the jails run as an unprivileged uid that must pass it.
  await chmod(stateDir, 0o711);
  const backend = createSandboxBackend({ stateDir: join(stateDir, "b") });
  kit.onClose(() => backend.close());

  // The account's key: logs in to VMs and signs API tokens.
  const keyPath = join(stateDir, "account");
  await execFileAsync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "emulator-account", "-f", keyPath]);
  const accountPrivateKey = await readFile(keyPath, "utf8");
  await rm(keyPath, { force: true });
  await rm(`${keyPath}.pub`, { force: true });
  const accountKey = parseOpenSshPrivateKey(accountPrivateKey);
  const keys = new Map<string, Ed25519Key>([[accountKey.fingerprint, accountKey]]);
  for (const line of options.sshPublicKeys ?? []) {
    const key = parsePublicKeyLine(line);
    keys.set(key.fingerprint, key);
  }

  let fleet: ReturnType<typeof createFleet> | undefined;
  let failingSessions = 0;
  const ssh = await kit.ssh({
    stateParentDir: stateDir,
    // exe.dev VMs give `ssh -t` a terminal (interactive logins are what they are for).
    permitTty: true,
    onSession: async (session) => {
      if (!fleet) throw new Error("not ready");
      if (failingSessions > 0) {
        failingSessions -= 1;
        session.stdin.resume();
        return { exitCode: 255 };
      }
      return fleet.session(session);
    },
  });
  await ssh.setAuthorizedKeys([...keys.values()].map((key) => key.line));
  fleet = createFleet(backend, ssh, { maxLifetimeMs: options.maxLifetimeMs ?? 6 * 60 * 60 * 1000, scratchDir: stateDir });
  kit.onClose(() => fleet!.close());

  const rate = new Map<string, number[]>();
  const commandTimeoutMs = options.commandTimeoutMs ?? 30_000;
  const router = createRouter({ errorEnvelope: ({ message }) => ({ error: message }), bodyLimit: MAX_BODY });

  const exec = async (ctx: HttpContext) => {
    // Auth first, then the rate limit, then the body: exe.dev's order.
    const auth = ctx.header("authorization") ?? "";
    if (!/^bearer /i.test(auth)) throw new HttpError(401, "missing or invalid Authorization header", { headers: { "www-authenticate": "Bearer" } });
    let signer: Ed25519Key;
    let permissions: TokenPermissions;
    try {
      const parsed = parseToken(auth.slice("bearer ".length));
      checkClaims(parsed.permissions, Date.now());
      signer = verifyToken(parsed, keys, API_NAMESPACE);
      permissions = parsed.permissions;
    } catch (error) {
      if (error instanceof TokenError) throw new HttpError(401, error.message, { headers: { "www-authenticate": "Bearer" } });
      throw error;
    }
    if (options.rateLimit && !allow(rate, signer.fingerprint, options.rateLimit)) throw new HttpError(429, "rate limit exceeded");
    let body: Buffer;
    try {
      body = await ctx.readBytes(MAX_BODY);
    } catch (error) {
      if (error instanceof HttpError && error.status === 413) throw new HttpError(413, "request body exceeds 64KB limit");
      throw error;
    }
    if (body.includes(0)) throw new HttpError(400, "request body must not contain null bytes");
    const line = body.toString("utf8").trim();
    if (line === "") throw new HttpError(400, "missing command in request body");
    let words: string[];
    try {
      words = shlexSplit(line);
    } catch (error) {
      if (error instanceof ShlexError) throw new HttpError(400, "invalid command syntax");
      throw error;
    }
    if (words.length === 0) throw new HttpError(400, "missing command in request body");
    const resolved = resolveCommandName(words);
    if (!resolved) throw new HttpError(404, "unknown command");
    ctx.record.note("command", resolved);
    if (!tokenAllows(permissions.cmds, resolved)) throw new HttpError(403, "command not allowed by token permissions");
    if (!isImplemented(words)) throw new HttpError(501, `the exe.dev emulator does not implement ${JSON.stringify(resolved)}`);

    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), commandTimeoutMs);
    let outcome;
    try {
      outcome = await runCommand(
        {
          fleet: fleet!,
          account: { email: options.email ?? "emulator@example.com", keys: () => [...keys.values()] },
          loginUser: ssh.loginUser,
          sshHost: "127.0.0.1",
          boxHost: "exe.xyz",
          maxVms: options.maxVms ?? 20,
          newDelayMs: options.newDelayMs ?? 0,
          deleteLingerMs: options.deleteLingerMs ?? 0,
          trailingDigitsAllowed: options.trailingDigitsAllowed === true,
          signal: deadline.signal,
        },
        words,
      );
    } finally {
      clearTimeout(timer);
    }
    if (outcome.exitCode !== 0 && deadline.signal.aborted) throw new HttpError(504, "command timed out");
    ctx.record.note("exitCode", outcome.exitCode);
    const text = outcome.output.trim();
    ctx.send(outcome.exitCode === 0 ? 200 : 422, text === "" ? "" : `${text}\n`, { "content-type": "application/json; charset=utf-8", "x-content-type-options": "nosniff" });
  };
  router.post("/exec", exec);
  for (const method of ["get", "put", "patch", "delete"] as const) {
    router[method]("/exec", () => {
      throw new HttpError(405, "method not allowed", { headers: { allow: "POST" } });
    });
  }

  const http = await kit.http(router, { tls: true, port: options.port });
  const url = `${http.secureUrl!}/exec`;
  const apiKey = mintToken(accountKey, { cmds: options.tokenCmds ?? ["new", "ls", "rm", "whoami"] });
  const caFile = await kit.caFile();
  const control: ExeDevControl = {
    accountKey,
    mintToken: (permissions = {}) => mintToken(accountKey, permissions),
    sshHost: (vm) => ssh.host(vm),
    vmNames: () => fleet!.all().map((vm) => vm.name),
    sshLog: () => ssh.log(),
    failSessions: (count) => void (failingSessions = count),
  };
  return {
    url,
    endpoints: { http: `${http.url}/exec` },
    credentials: { apiKey, sshPrivateKey: accountPrivateKey, sshPublicKey: accountKey.line },
    env: { EXE_API_URL: url, EXE_API_KEY: apiKey, NODE_EXTRA_CA_CERTS: caFile },
    async leftovers() {
      const vms = fleet!.all().map((vm) => `vm ${vm.name} (${vm.status})`);
      const jails = (await backend.list()).map((jail) => `jail ${jail.id} (${jail.state})`);
      return [...vms, ...jails];
    },
    control,
  };
}

function allow(rate: Map<string, number[]>, key: string, limit: { requests: number; windowMs: number }): boolean {
  const now = Date.now();
  const recent = (rate.get(key) ?? []).filter((at) => now - at < limit.windowMs);
  if (recent.length >= limit.requests) {
    rate.set(key, recent);
    return false;
  }
  recent.push(now);
  rate.set(key, recent);
  return true;
}

/**
 * exe.dev on loopback: the HTTPS `POST /exec` API (https, and plain http on the same port) and, per
 * VM, a real OpenSSH server on a port of its own whose sessions run in that VM's bubblewrap jail.
 */
export const emulator: EmulatorDefinition<ExeDevEmulatorOptions> = {
  name: "exe-dev",
  description: "exe.dev HTTPS /exec API and per-VM OpenSSH servers (VMs are bubblewrap jails)",
  start: (kit, options) => startExeDevParts(kit, options),
};

/** Starts the emulator with its run-time switches (tests). */
export async function startExeDevEmulator(options: ExeDevEmulatorOptions = {}): Promise<RunningEmulator & { control: ExeDevControl }> {
  let control: ExeDevControl | undefined;
  const running = await runEmulator<ExeDevEmulatorOptions>(
    {
      ...emulator,
      async start(kit, opts) {
        const parts = await startExeDevParts(kit, opts);
        control = parts.control;
        return parts;
      },
    },
    { options },
  );
  return Object.assign(running, { control: control! });
}
