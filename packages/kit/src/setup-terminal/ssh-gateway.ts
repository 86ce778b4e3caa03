import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import ssh2 from "ssh2";
import type { Connection, ServerChannel, Session } from "ssh2";
import type { SetupConnection } from "../provider/types.js";
import type { PtyExit, PtyProcess, PtySize, PtySpec } from "../transport.js";

/**
 * The host's setup terminal for custom images, as an SSH server in the plugin worker.
 *
 * The host's browser terminal speaks only SSH: it parses the setup session's payload
 * (`ssh -p <port> <user>@<host>`), connects with ssh2 as `<user>` with NO password or key (the user
 * name is the credential), pins the host key on first use and opens one shell. The host forks the
 * worker on its own machine, so the worker listens on 127.0.0.1 (an ephemeral port), and the user
 * name is a fresh random token bound to one setup lease. A shell request opens a PTY in that lease
 * through the transport's own PTY (the one the login hooks use): bytes both ways, a window change is
 * a resize, the shell's end ends the channel with its exit status. Nothing else is served: no exec,
 * no subsystem (sftp), no forwarding, no agent or X11.
 *
 * The listener starts on the first connection asked for and closes once no setup lease is left; the
 * host key (ed25519) is made in memory once per gateway and kept across listener restarts, so a
 * pinned key stays valid for the worker's life. Tokens never appear in logs or errors.
 */

/** A setup lease the terminal opens shells in. */
export interface SetupShellTarget {
  providerLeaseId: string;
  /** Opens a program on a PTY in the lease (the transport's PTY, tracked as the lease's work). */
  openPty(spec: PtySpec): Promise<PtyProcess>;
}

export interface SshSetupGatewayOptions {
  /** The clock tokens expire by (ms since the epoch); default `Date.now`. */
  now?: () => number;
  log?: (message: string) => void;
  /** What a shell request runs (`sh -c`): default a login bash, else a login sh. */
  shellScript?: string;
  /** Live shells per worker; default 16. */
  maxShells?: number;
  /** Unexpired tokens kept per lease (each start/get mints one); the oldest go first. Default 32. */
  maxTokensPerLease?: number;
}

export interface SshSetupGateway {
  /**
   * A fresh token for `target`, valid `minutes` (default 15) and never past `expiresAt`; starts the
   * listener when it is not running. Answers the host's `ssh` connection summary and payload.
   */
  connection(target: SetupShellTarget, input: { expiresAt: Date | null; minutes: number | null }): Promise<SetupConnection>;
  /** Revokes a lease's tokens and ends its shells and connections; the listener closes when no lease is left. */
  closeLease(providerLeaseId: string): Promise<void>;
  /** Ends everything (worker shutdown). */
  close(): Promise<void>;
  /** The listening port, or null when the listener is closed. */
  readonly port: number | null;
  /** Shells open now (for tests and leak checks). */
  readonly shells: number;
}

const DEFAULT_SHELL = "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l";
const DEFAULT_MINUTES = 15;
const LISTEN_HOST = "127.0.0.1";
/** A terminal type the client may name; anything else runs as xterm-256color. */
const TERM_NAME = /^[A-Za-z0-9._+-]{1,64}$/;
/** Client environment passed to the shell: the locale only (the host sends LANG and LC_CTYPE). */
const PASSED_ENV = /^(LANG|LC_[A-Z]+)$/;
const ENV_VALUE = /^[A-Za-z0-9._@-]{1,64}$/;

interface TokenRecord {
  digest: Buffer;
  providerLeaseId: string;
  expiresAtMs: number;
}

interface LeaseRecord {
  target: SetupShellTarget;
  connections: Set<Connection>;
  shells: Set<PtyProcess>;
}

const digestOf = (token: string) => createHash("sha256").update(token, "utf8").digest();

export function createSshSetupGateway(opts: SshSetupGatewayOptions = {}): SshSetupGateway {
  const now = opts.now ?? Date.now;
  const log = opts.log ?? (() => undefined);
  const shellScript = opts.shellScript ?? DEFAULT_SHELL;
  const maxShells = opts.maxShells ?? 16;
  const maxTokens = opts.maxTokensPerLease ?? 32;
  const leases = new Map<string, LeaseRecord>();
  let tokens: TokenRecord[] = [];
  let hostKey: string | undefined;
  let server: InstanceType<typeof ssh2.Server> | undefined;
  let listening: Promise<number> | undefined;
  let port: number | null = null;
  let liveShells = 0;
  const clients = new Set<Connection>();

  /** The lease a user name names, comparing every live token's digest in constant time. */
  const leaseOfToken = (username: string): LeaseRecord | undefined => {
    const at = now();
    tokens = tokens.filter((record) => record.expiresAtMs > at && leases.has(record.providerLeaseId));
    const digest = digestOf(username);
    let found: TokenRecord | undefined;
    for (const record of tokens) if (timingSafeEqual(record.digest, digest)) found = record;
    return found ? leases.get(found.providerLeaseId) : undefined;
  };

  const serveShell = (lease: LeaseRecord, session: Session) => {
    let size: PtySize = { cols: 80, rows: 24 };
    let term = "xterm-256color";
    const env: Record<string, string> = {};
    let process: PtyProcess | undefined;
    let started = false;
    // SSH orders a channel's requests and data; a transport's resize may travel apart from its
    // bytes (another call), so each waits for the one before: a window change reaches the terminal
    // before the keystrokes typed after it.
    let inOrder: Promise<unknown> = Promise.resolve();
    const then = (work: (opened: PtyProcess) => Promise<unknown>) => {
      inOrder = inOrder.then(() => (process ? work(process) : undefined)).catch(() => undefined);
    };

    session.on("pty", (accept, _reject, info) => {
      size = sizeOf(info, size);
      if (TERM_NAME.test(info.term)) term = info.term;
      accept?.();
    });
    session.on("env", (accept, reject, info) => {
      if (PASSED_ENV.test(info.key) && ENV_VALUE.test(info.val)) {
        env[info.key] = info.val;
        accept?.();
      } else reject?.();
    });
    session.on("window-change", (accept, _reject, info) => {
      size = sizeOf(info, size);
      accept?.();
      const next = size;
      then((opened) => opened.resize(next));
    });
    session.on("signal", (accept, _reject, info) => {
      accept?.();
      const name = `SIG${info.name}`;
      if (name === "SIGINT" || name === "SIGTERM" || name === "SIGKILL" || name === "SIGHUP") void process?.kill(name).catch(() => undefined);
    });
    for (const refused of ["exec", "subsystem", "sftp", "x11", "auth-agent"] as const) {
      session.on(refused, (_accept: unknown, reject: (() => void) | undefined) => {
        log(`setup terminal: refused a "${refused}" request on lease ${lease.target.providerLeaseId} (only a shell is served)`);
        reject?.();
      });
    }
    session.on("shell", (accept, reject) => {
      if (started || liveShells >= maxShells || !leases.has(lease.target.providerLeaseId)) {
        reject?.();
        return;
      }
      started = true;
      liveShells += 1;
      const channel: ServerChannel = accept();
      let ended = false;
      const openSize = size;
      const finish = (exit: PtyExit | null) => {
        if (ended) return;
        ended = true;
        liveShells -= 1;
        if (process) lease.shells.delete(process);
        try {
          if (exit?.exitCode != null) channel.exit(exit.exitCode);
          else if (exit?.signal) channel.exit(exit.signal.replace(/^SIG/, ""), false, "");
          channel.end();
        } catch {
          // The client already went.
        }
      };
      void lease.target
        .openPty({ script: shellScript, ...size, env: { ...env, TERM: term }, onData: (bytes) => channel.write(bytes) })
        .then((opened) => {
          process = opened;
          lease.shells.add(opened);
          // A window change while the terminal was opening.
          if (size.cols !== openSize.cols || size.rows !== openSize.rows) {
            const latest = size;
            then((shell) => shell.resize(latest));
          }
          channel.on("data", (bytes: Buffer) => then((shell) => shell.write(bytes)));
          // The client closed the channel (or the connection went): hang the shell up.
          channel.on("close", () => void opened.close().catch(() => undefined));
          void opened.exited.then(finish);
          if (!leases.has(lease.target.providerLeaseId)) void opened.close();
        })
        .catch((error: unknown) => {
          log(`setup terminal: the shell could not open on lease ${lease.target.providerLeaseId}: ${error instanceof Error ? error.message : String(error)}`);
          channel.stderr.write("the setup sandbox's terminal could not open\r\n");
          finish({ exitCode: 255, signal: null });
        });
    });
  };

  const onConnection = (client: Connection) => {
    let lease: LeaseRecord | undefined;
    clients.add(client);
    client.on("close", () => clients.delete(client));
    client.on("error", () => undefined);
    client.on("authentication", (ctx) => {
      const found = leaseOfToken(ctx.username);
      if (!found) {
        // Never the name: it is (a guess at) a credential.
        log(`setup terminal: refused a connection with an unknown or expired token (method ${ctx.method})`);
        ctx.reject(["none"]);
        return;
      }
      lease = found;
      ctx.accept();
    });
    client.on("ready", () => {
      if (!lease || !leases.has(lease.target.providerLeaseId)) {
        client.end();
        return;
      }
      const mine = lease;
      mine.connections.add(client);
      client.on("close", () => mine.connections.delete(client));
      client.on("session", (accept) => serveShell(mine, accept()));
      // No forwarding of any kind.
      client.on("tcpip", (_accept, reject) => reject());
      client.on("openssh.streamlocal", (_accept, reject) => reject());
      client.on("request", (_accept, reject) => reject?.());
    });
  };

  const start = (): Promise<number> => {
    listening ??= new Promise<number>((resolve, reject) => {
      hostKey ??= generateHostKey();
      const made = new ssh2.Server({ hostKeys: [hostKey], ident: "paperclip-setup-terminal" }, onConnection);
      made.once("error", reject);
      made.listen(0, LISTEN_HOST, () => {
        server = made;
        port = (made.address() as AddressInfo).port;
        resolve(port);
      });
    });
    return listening;
  };

  const stopWhenIdle = async () => {
    if (leases.size > 0 || !listening) return;
    const pending = listening;
    listening = undefined;
    await pending.catch(() => undefined);
    const closing = server;
    server = undefined;
    port = null;
    // Connections still authenticating (or refused) would hold the close: they go too.
    for (const client of clients) client.end();
    if (closing) await new Promise<void>((resolve) => closing.close(() => resolve()));
  };

  const endLease = async (record: LeaseRecord) => {
    for (const client of record.connections) client.end();
    await Promise.all([...record.shells].map((shell) => shell.close().catch(() => undefined)));
  };

  return {
    get port() {
      return port;
    },
    get shells() {
      return liveShells;
    },

    async connection(target, input) {
      const minutes = input.minutes && input.minutes > 0 ? input.minutes : DEFAULT_MINUTES;
      let expiresAtMs = now() + minutes * 60_000;
      if (input.expiresAt) expiresAtMs = Math.min(expiresAtMs, input.expiresAt.getTime());
      const known = leases.get(target.providerLeaseId);
      if (known) known.target = target;
      else leases.set(target.providerLeaseId, { target, connections: new Set(), shells: new Set() });
      const listenPort = await start();
      // Hex: the host refuses a destination that starts with "-" (a base64url token can).
      const token = randomBytes(24).toString("hex");
      const mine = tokens.filter((record) => record.providerLeaseId === target.providerLeaseId);
      if (mine.length >= maxTokens) {
        const drop = new Set(mine.slice(0, mine.length - maxTokens + 1));
        tokens = tokens.filter((record) => !drop.has(record));
      }
      tokens.push({ digest: digestOf(token), providerLeaseId: target.providerLeaseId, expiresAtMs });
      const expiresAt = new Date(expiresAtMs).toISOString();
      return {
        summary: { type: "ssh", username: null, hostRedacted: true, portRedacted: true, commandRedacted: true, expiresAt },
        payload: { type: "ssh", command: `ssh -p ${listenPort} ${token}@${LISTEN_HOST}`, expiresAt },
      };
    },

    async closeLease(providerLeaseId) {
      const record = leases.get(providerLeaseId);
      leases.delete(providerLeaseId);
      tokens = tokens.filter((token) => token.providerLeaseId !== providerLeaseId);
      if (record) await endLease(record);
      await stopWhenIdle();
    },

    async close() {
      const records = [...leases.values()];
      leases.clear();
      tokens = [];
      await Promise.all(records.map(endLease));
      await stopWhenIdle();
    },
  };
}

function sizeOf(info: { cols: number; rows: number }, fallback: PtySize): PtySize {
  const ok = (n: number) => Number.isInteger(n) && n > 0 && n <= 1000;
  return ok(info.cols) && ok(info.rows) ? { cols: info.cols, rows: info.rows } : fallback;
}

/**
 * An ed25519 host key ssh2 can load. ssh2 1.17's own generator writes a key its parser refuses about
 * once in 200 (measured: 15 of 3000), which would fail a setup start; a refused key is made again.
 */
export function generateHostKey(): string {
  for (let attempt = 0; ; attempt++) {
    const key = ssh2.utils.generateKeyPairSync("ed25519").private;
    const parsed = ssh2.utils.parseKey(key);
    if (!(parsed instanceof Error)) return key;
    if (attempt >= 20) throw new Error(`could not make an SSH host key for the setup terminal: ${parsed.message}`);
  }
}
