import { randomUUID } from "node:crypto";
import { PassThrough } from "node:stream";
import { decodeChannelBytes } from "@paperclipai/plugin-sdk";
import type {
  PluginDuplexChannelCloseParams,
  PluginDuplexChannelCloseResult,
  PluginDuplexChannelOpenParams,
  PluginDuplexChannelOpenResult,
  PluginDuplexChannelStopParams,
  PluginDuplexChannelWriteParams,
} from "@paperclipai/plugin-sdk/protocol";
import type { PluginDuplexChannelClient } from "@paperclipai/plugin-sdk/types";
import { shellQuote } from "../exec/quote.js";
import { createRedactor } from "../redact/redactor.js";
import { supportsDuplex } from "../provider/capabilities.js";
import type { ScriptRunner } from "../transport.js";

/**
 * Persistent duplex channels (the host's `duplexCommandStream` capability) over any ScriptRunner.
 *
 * The host opens a channel to run its callback-bridge gateway in the sandbox and then speaks HTTP/2
 * to it over the command's stdin/stdout, instead of polling a file queue with one execute per step.
 * To the provider a channel is a byte pipe: host writes go to the command's stdin in order, every
 * stdout chunk goes back as a `duplexChannel.data` notification, and the command's end as one
 * `duplexChannel.exit`. stderr never enters the stream (it would corrupt the HTTP/2 framing); its
 * tail is logged when the command fails.
 */

export interface DuplexLeaseScope {
  driverKey: string;
  companyId: string;
  environmentId: string;
  providerLeaseId: string;
}

export interface DuplexChannelsOptions {
  /**
   * The runner of the live lease the channel belongs to, and an abort signal that fires when that
   * lease is released or destroyed (the channel ends with it). Throws when the lease is not running.
   */
  runnerFor(scope: DuplexLeaseScope): Promise<{ runner: ScriptRunner; leaseSignal?: AbortSignal }>;
  /** The host's notification client (`ctx.duplexChannel`); read at each use, it exists after setup. */
  notify(): PluginDuplexChannelClient | undefined;
  /** Provider log line (already free of channel bytes). */
  log?(message: string): void;
  /** Open channels per worker; the host keeps its own route ceiling too. Default 32. */
  maxChannels?: number;
  /** Grace between SIGTERM and SIGKILL when a channel is stopped. Default 1000 ms. */
  stopGraceMs?: number;
}

/** Refused: unknown route/session pair, a closed channel, bad bytes, or too many channels. */
export class DuplexChannelError extends Error {
  override name = "DuplexChannelError";
}

interface Channel {
  readonly hostRouteId: string;
  readonly workerSessionId: string;
  readonly providerLeaseId: string;
  readonly stdin: PassThrough;
  readonly stop: AbortController;
  /** Settles once the command has ended and `duplexChannel.exit` was sent. */
  ended: Promise<void>;
  exited: boolean;
}

const MAX_ARGV_ELEMENTS = 4096;
const MAX_ARGV_BYTES = 256 * 1024;
/** `NAME=value` assignments the host puts in a launch command (e.g. `exec env PAPERCLIP_BRIDGE_TOKEN='...' node ...`). */
const SECRET_ASSIGNMENT = /\b[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|JWT|NONCE|CREDENTIAL)[A-Z0-9_]*=('[^']*'|"[^"]*"|[^\s'"]+)/g;
const STDERR_TAIL_BYTES = 4096;
/** The host ends a route on any data notification over 256 KiB; a transport may hand over more at once. */
export const MAX_DATA_NOTIFICATION_BYTES = 64 * 1024;

export interface DuplexChannels {
  open(params: PluginDuplexChannelOpenParams): Promise<PluginDuplexChannelOpenResult>;
  write(params: PluginDuplexChannelWriteParams): Promise<void>;
  stop(params: PluginDuplexChannelStopParams): Promise<void>;
  close(params: PluginDuplexChannelCloseParams): Promise<PluginDuplexChannelCloseResult>;
  /** Ends every channel of a lease (at release or destroy) and resolves once they have all exited. */
  closeLease(providerLeaseId: string): Promise<void>;
  /** Channels currently open (for tests and leak checks). */
  readonly size: number;
}

export function createDuplexChannels(opts: DuplexChannelsOptions): DuplexChannels {
  const channels = new Map<string, Channel>(); // by hostRouteId: the host's authoritative key
  const opening = new Set<string>(); // routes whose lease lookup is under way
  const maxChannels = opts.maxChannels ?? 32;
  const stopGraceMs = opts.stopGraceMs ?? 1_000;

  /** The channel for the exact pair the open reply bound; anything else is refused. */
  const exact = (hostRouteId: string, workerSessionId: string): Channel => {
    const channel = channels.get(hostRouteId);
    if (!channel || channel.workerSessionId !== workerSessionId) {
      throw new DuplexChannelError("no open duplex channel for this route and session");
    }
    return channel;
  };

  return {
    get size() {
      return channels.size;
    },

    async open(params) {
      const { hostRouteId } = params;
      if (typeof hostRouteId !== "string" || hostRouteId.length === 0) throw new DuplexChannelError("hostRouteId must be a non-empty string");
      const argv = checkArgv(params.command);
      if (channels.has(hostRouteId) || opening.has(hostRouteId)) throw new DuplexChannelError("a duplex channel is already open for this route");
      if (channels.size + opening.size >= maxChannels) throw new DuplexChannelError(`too many open duplex channels (limit ${maxChannels})`);
      opening.add(hostRouteId);
      let lease: Awaited<ReturnType<DuplexChannelsOptions["runnerFor"]>>;
      try {
        lease = await opts.runnerFor(params);
      } finally {
        opening.delete(hostRouteId);
      }
      const { runner, leaseSignal } = lease;
      if (leaseSignal?.aborted) throw new DuplexChannelError("the lease is being released");
      // A provider whose transport depends on its config (one manifest, several transports) may
      // serve a lease whose runner cannot carry a channel: refuse it rather than corrupt the stream.
      if (!supportsDuplex(runner.capabilities))
        throw new DuplexChannelError("this lease's command transport cannot carry a duplex channel (it needs streamed stdin with EOF, binary-safe live output)");

      const workerSessionId = randomUUID();
      const stdin = new PassThrough();
      const stop = new AbortController();
      const onLeaseEnd = () => stop.abort();
      leaseSignal?.addEventListener("abort", onLeaseEnd, { once: true });
      let stderrTail = Buffer.alloc(0);
      // The launch command carries the bridge token: whatever this channel logs is scrubbed of it.
      const redact = createRedactor(secretsIn(argv));
      const channel: Channel = {
        hostRouteId,
        workerSessionId,
        providerLeaseId: params.providerLeaseId,
        stdin,
        stop,
        ended: Promise.resolve(),
        exited: false,
      };
      const finish = (exitCode: number | null, transportClosed: boolean) => {
        if (channel.exited) return;
        channel.exited = true;
        leaseSignal?.removeEventListener("abort", onLeaseEnd);
        stdin.destroy();
        if (channels.get(hostRouteId) === channel) channels.delete(hostRouteId);
        opts.notify()?.exit(hostRouteId, workerSessionId, exitCode, transportClosed || undefined);
      };

      // Each argv element is quoted: nothing the host sends is parsed by a shell twice.
      const run = runner.run(`exec ${argv.map(shellQuote).join(" ")}`, {
        stdin,
        stdout: (chunk) => {
          if (channel.exited) return;
          const host = opts.notify();
          for (let offset = 0; offset < chunk.length; offset += MAX_DATA_NOTIFICATION_BYTES) {
            const part = chunk.subarray(offset, offset + MAX_DATA_NOTIFICATION_BYTES);
            host?.data(hostRouteId, workerSessionId, new Uint8Array(part.buffer, part.byteOffset, part.byteLength));
          }
        },
        stderr: (chunk) => {
          stderrTail = Buffer.concat([stderrTail, chunk]).subarray(-STDERR_TAIL_BYTES);
        },
        signal: stop.signal,
        killGraceMs: stopGraceMs,
      });
      channel.ended = run.then(
        (exit) => {
          if (exit.exitCode !== 0 && exit.reason !== "aborted" && stderrTail.length > 0) {
            opts.log?.(redact(`duplex channel command exited ${exit.exitCode ?? exit.signal}: ${stderrTail.toString("utf8").trim()}`));
          }
          finish(exit.reason === "aborted" ? null : exit.exitCode, false);
        },
        (error: unknown) => {
          // The transport to the sandbox broke (not a process exit): the host maps this to its own reason.
          opts.log?.(redact(`duplex channel transport lost: ${error instanceof Error ? error.message : String(error)}`));
          finish(null, true);
        },
      );
      channels.set(hostRouteId, channel);
      return { hostRouteId, workerSessionId };
    },

    async write(params) {
      const channel = exact(params.hostRouteId, params.workerSessionId);
      const bytes = decodeChannelBytes(params.data);
      if (bytes === null) throw new DuplexChannelError("data is not well-formed base64");
      if (bytes.length === 0) return;
      if (channel.exited || channel.stdin.destroyed) throw new DuplexChannelError("the duplex channel's command has ended");
      // Resolve once the runner has taken the bytes, so the host's pending-write bound means something.
      if (!channel.stdin.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))) {
        await new Promise<void>((resolve) => {
          const done = () => {
            channel.stdin.off("drain", done);
            channel.stdin.off("close", done);
            resolve();
          };
          channel.stdin.once("drain", done);
          channel.stdin.once("close", done);
        });
      }
    },

    async stop(params) {
      const channel = exact(params.hostRouteId, params.workerSessionId);
      channel.stop.abort();
    },

    async close(params) {
      const channel = channels.get(params.hostRouteId);
      if (!channel) return { hostRouteId: params.hostRouteId };
      channel.stdin.end();
      channel.stop.abort();
      await channel.ended;
      return { hostRouteId: channel.hostRouteId, workerSessionId: channel.workerSessionId };
    },

    async closeLease(providerLeaseId) {
      const ofLease = [...channels.values()].filter((channel) => channel.providerLeaseId === providerLeaseId);
      for (const channel of ofLease) {
        channel.stdin.end();
        channel.stop.abort();
      }
      await Promise.all(ofLease.map((channel) => channel.ended));
    },
  };
}

/** Values of secret-looking `NAME=value` assignments anywhere in the argv, unquoted. */
function secretsIn(argv: readonly string[]): string[] {
  const found: string[] = [];
  for (const element of argv) {
    for (const match of element.matchAll(SECRET_ASSIGNMENT)) {
      const raw = match[1]!;
      found.push(raw.startsWith("'") || raw.startsWith('"') ? raw.slice(1, -1) : raw);
    }
  }
  return found;
}

function checkArgv(command: unknown): string[] {
  if (!Array.isArray(command) || command.length === 0) throw new DuplexChannelError("command must be a non-empty argv array");
  if (command.length > MAX_ARGV_ELEMENTS) throw new DuplexChannelError(`command has more than ${MAX_ARGV_ELEMENTS} elements`);
  let bytes = 0;
  for (const element of command) {
    if (typeof element !== "string") throw new DuplexChannelError("every command element must be a string");
    if (element.includes("\0")) throw new DuplexChannelError("command elements must not contain NUL bytes");
    bytes += Buffer.byteLength(element);
  }
  if (command[0] === "") throw new DuplexChannelError("command[0] (the program) must not be empty");
  if (bytes > MAX_ARGV_BYTES) throw new DuplexChannelError(`command is larger than ${MAX_ARGV_BYTES} bytes`);
  return command as string[];
}
