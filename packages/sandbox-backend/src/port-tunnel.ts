/**
 * A byte tunnel from this worker to a TCP port on a sandbox's own loopback (the jail has a network
 * namespace of its own, so nothing on the host can connect there): a relay process in the jail,
 * started through the sandbox's runner, joins its stdin and stdout to the port. What a vendor's
 * proxy does for an app or preview port inside a sandbox (Coder's app proxy, preview URLs).
 */
import { Duplex, PassThrough } from "node:stream";
import type { ScriptRunner } from "@paperclip-sandbox/kit";

/** Node's CommonJS `-e` relay: stdin → socket (half-closed at EOF), socket → stdout; exit 2 when the port refuses. */
const RELAY = [
  'const s=require("net").connect(Number(process.env.PAPERCLIP_TUNNEL_PORT),"127.0.0.1");',
  "s.setNoDelay(true);",
  's.on("connect",()=>{process.stdin.pipe(s);s.pipe(process.stdout);});',
  's.on("error",(e)=>{process.stderr.write(String(e.code||e.message));process.exit(2);});',
].join("");

/** Why a tunnel failed: the port refused, or the relay could not run. */
export class PortTunnelError extends Error {
  override name = "PortTunnelError";
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/**
 * A socket-like Duplex: the relay's stdout is its readable side, its writes reach the port, `end()`
 * half-closes. The no-op socket methods let `http.request({ createConnection })` and `ws` use it as
 * their connection (keep-alive included).
 */
export class PortTunnel extends Duplex {
  readonly remotePort: number;
  readonly remoteAddress = "127.0.0.1";
  private readonly input = new PassThrough();
  private readonly stop = new AbortController();
  /** Settles when the relay ended (its exit, or a transport failure). */
  readonly relayEnded: Promise<void>;

  constructor(runner: ScriptRunner, port: number) {
    super({ allowHalfOpen: true });
    this.remotePort = port;
    let stderr = "";
    let received = false;
    const output = new PassThrough();
    output.on("data", (chunk: Buffer) => {
      received = true;
      this.touch();
      if (!this.push(chunk)) output.pause();
    });
    output.on("end", () => this.push(null));
    this.readResume = () => output.resume();
    this.relayEnded = runner
      .run('exec node -e "$PAPERCLIP_TUNNEL_RELAY"', {
        stdin: this.input,
        stdout: output,
        stderr: (chunk) => void (stderr = (stderr + chunk.toString("utf8")).slice(-512)),
        env: { PAPERCLIP_TUNNEL_RELAY: RELAY, PAPERCLIP_TUNNEL_PORT: String(port) },
        signal: this.stop.signal,
        killGraceMs: 0,
      })
      .then((exit) => {
        if (exit.exitCode !== 0 && exit.reason !== "aborted" && !received) {
          const code = /^E[A-Z]+$/.test(stderr.trim()) ? stderr.trim() : "ERELAY";
          this.destroy(new PortTunnelError(`port ${port} in the sandbox: ${code === "ECONNREFUSED" ? "connection refused" : stderr.trim() || `relay exited ${exit.exitCode}`}`, code));
        } else if (!output.writableEnded) output.end();
      })
      .catch((error: unknown) => {
        this.destroy(error instanceof Error ? error : new Error(String(error)));
      });
  }

  private readResume: () => void;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;

  private touch(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.idleMs > 0 && !this.destroyed) {
      this.idleTimer = setTimeout(() => this.emit("timeout"), this.idleMs);
      this.idleTimer.unref();
    }
  }

  override _read(): void {
    this.readResume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.touch();
    if (this.input.write(chunk)) callback();
    else this.input.once("drain", () => callback());
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.input.end();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.stop.abort();
    this.input.destroy();
    callback(error);
  }

  // What http.Agent and ws call on a net.Socket; a tunnel has nothing to tune.
  setKeepAlive(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  /** Like a socket's: `timeout` after `ms` without traffic either way (0 turns it off). */
  setTimeout(ms: number, callback?: () => void): this {
    if (callback) {
      if (ms === 0) this.removeListener("timeout", callback);
      else this.once("timeout", callback);
    }
    this.idleMs = ms;
    this.touch();
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

/** Opens a tunnel to `127.0.0.1:<port>` inside the sandbox whose runner this is (one relay process per tunnel). */
export function openPortTunnel(runner: ScriptRunner, port: number): PortTunnel {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new RangeError(`port must be an integer from 1 to 65535 (got ${String(port)})`);
  return new PortTunnel(runner, port);
}
