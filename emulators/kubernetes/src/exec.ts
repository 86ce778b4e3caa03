// pods/exec over WebSocket with the real channel protocols: v5.channel.k8s.io (stdin half-closes
// with a [255, 0] frame) and v4.channel.k8s.io (no half-close: stdin ends only with the socket).
// The status channel carries a metav1.Status with the exit code, then the server closes.
import { randomUUID } from "node:crypto";
import { PassThrough, Writable } from "node:stream";
import { requireBearer, type Router, type WebSocketContext } from "@paperclip-sandbox/emulator-kit";
import type { WebSocket } from "ws";
import type { Cluster } from "./cluster.js";
import { resolveCommand } from "./kubelet.js";
import { apiError, badRequest } from "./status.js";
import type { KubeObject } from "./validation.js";

export const EXEC_PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"] as const;

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGPIPE: 13, SIGTERM: 15 };

export interface ExecRouteOptions {
  cluster: Cluster;
  token: string;
  /** Sub-protocols served, preferred first (default v5 then v4). */
  protocols: readonly string[];
}

interface ExecRequest {
  pod: KubeObject;
  command: string[];
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
}

export function registerExecRoute(router: Router, options: ExecRouteOptions): void {
  const { cluster } = options;
  const requests = new WeakMap<WebSocketContext, ExecRequest>();
  router.ws("/api/v1/namespaces/:namespace/pods/:name/exec", {
    protocols: options.protocols,
    requireProtocol: true,
    maxPayload: 32 * 1024 * 1024,
    before(ctx) {
      requireBearer(ctx, { accept: [options.token], missingMessage: "Unauthorized", invalidMessage: "Unauthorized", code: "Unauthorized" });
      const pod = cluster.store.mustGet(cluster.type("", "pods"), ctx.params.namespace, ctx.params.name!);
      const command = ctx.query.getAll("command");
      if (command.length === 0) throw badRequest("you must specify at least 1 command");
      const containers: string[] = (pod.spec?.containers ?? []).map((c: { name: string }) => c.name);
      const container = ctx.query.get("container") ?? containers[0];
      if (!container || !containers.includes(container)) throw badRequest(`container ${container} is not valid for pod ${ctx.params.name}`);
      const flag = (name: string) => ["true", "1"].includes(ctx.query.get(name) ?? "");
      if (flag("tty")) throw badRequest("emulator limit: tty exec is not emulated");
      if (!flag("stdout") && !flag("stderr") && !flag("stdin")) throw badRequest("you must specify at least one of stdin, stdout, stderr");
      if (pod.status?.phase !== "Running" || !cluster.kubelet.sandboxOf(pod)) {
        throw apiError(400, "BadRequest", `container ${container} is not running (pod phase ${pod.status?.phase ?? "Pending"})`);
      }
      requests.set(ctx, { pod, command, stdin: flag("stdin"), stdout: flag("stdout"), stderr: flag("stderr") });
    },
    async onConnection(ws, ctx) {
      const request = requests.get(ctx);
      if (!request) return ws.close(1011, "no exec request");
      await runExec(ws, ctx.protocol, request, cluster);
    },
  });
}

/** A sink that sends each chunk as a channel frame, with back-pressure from the socket. */
function channelSink(ws: WebSocket, channel: number, enabled: boolean): Writable {
  return new Writable({
    highWaterMark: 256 * 1024,
    write(chunk: Buffer, _encoding, callback) {
      if (!enabled || ws.readyState !== ws.OPEN) return callback();
      const frame = Buffer.allocUnsafe(chunk.length + 1);
      frame[0] = channel;
      chunk.copy(frame, 1);
      ws.send(frame, () => callback());
    },
  });
}

async function runExec(ws: WebSocket, protocol: string, request: ExecRequest, cluster: Cluster): Promise<void> {
  const sandbox = cluster.kubelet.sandboxOf(request.pod);
  if (!sandbox) return ws.close(1011, "container is not running");
  const stdin = new PassThrough();
  let stdinOpen = request.stdin;
  if (!request.stdin) stdin.end();
  const closeStdin = () => {
    if (stdinOpen) {
      stdinOpen = false;
      stdin.end();
    }
  };
  ws.on("message", (data: Buffer, isBinary: boolean) => {
    const bytes = isBinary ? data : Buffer.from(data);
    if (bytes.length === 0) return;
    const channel = bytes[0];
    if (channel === 0 && stdinOpen) stdin.write(bytes.subarray(1));
    else if (channel === 255 && protocol === "v5.channel.k8s.io" && bytes[1] === 0) closeStdin();
    // 4 (resize) and anything else: nothing to do without a tty.
  });
  // The client going away ends stdin (the command itself is not signalled, as with a CRI exec).
  ws.on("close", closeStdin);
  // A command the container does not have fails as runc's exec fails: no process, a 500 Status.
  const missing = await resolveCommand(sandbox, request.command[0]!).catch(() => null);
  if (missing) {
    const message = `Internal error occurred: error executing command in container: failed to exec in container: failed to start exec "${randomUUID().replace(/-/g, "")}": OCI runtime exec failed: exec failed: unable to start container process: ${missing}: unknown`;
    return sendStatusAndClose(ws, { metadata: {}, status: "Failure", message, reason: "InternalError", details: { causes: [{ message }] }, code: 500 });
  }
  // The runtime execs in the container's working directory (the image's WORKDIR, `/`, without one).
  const workingDir: string = request.pod.spec?.containers?.[0]?.workingDir ?? "/";
  const script = `cd -- ${quote(workingDir)} 2>/dev/null; exec ${request.command.map(quote).join(" ")}`;
  let exitCode: number;
  const stdout = channelSink(ws, 1, request.stdout);
  const stderr = channelSink(ws, 2, request.stderr);
  // Every output frame goes out before the status frame (the client takes the status as the end).
  const flushed = (sink: Writable) => new Promise<void>((resolve) => (sink.writableFinished ? resolve() : (sink.once("finish", resolve), sink.once("error", () => resolve()), sink.end())));
  try {
    const exit = await sandbox.runner.run(script, { stdin, stdout, stderr });
    await Promise.all([flushed(stdout), flushed(stderr)]);
    exitCode = exit.exitCode ?? 128 + (SIGNALS[exit.signal ?? ""] ?? 9);
  } catch (error) {
    const status = {
      metadata: {},
      status: "Failure",
      message: `error executing command in container: ${(error as Error).message}`,
      reason: "InternalError",
      details: { causes: [{ message: (error as Error).message }] },
      code: 500,
    };
    return sendStatusAndClose(ws, status);
  }
  const status =
    exitCode === 0
      ? { metadata: {}, status: "Success" }
      : {
          metadata: {},
          status: "Failure",
          message: `command terminated with non-zero exit code: error executing command [${request.command.join(" ")}], exit code ${exitCode}`,
          reason: "NonZeroExitCode",
          details: { causes: [{ reason: "ExitCode", message: String(exitCode) }] },
        };
  sendStatusAndClose(ws, status);
}

function sendStatusAndClose(ws: WebSocket, status: Record<string, unknown>): void {
  if (ws.readyState !== ws.OPEN) return;
  const body = Buffer.from(JSON.stringify(status));
  ws.send(Buffer.concat([Buffer.from([3]), body]), () => ws.close(1000));
}
