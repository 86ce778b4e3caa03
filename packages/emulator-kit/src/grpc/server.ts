import { setMaxListeners } from "node:events";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import type { FaultInjector } from "../faults/injector.js";
import type { FaultKind, FaultOf } from "../faults/types.js";
import { listen, type Listener } from "../http/listener.js";
import { defaultUnexpectedError } from "../http/server.js";
import { generateSelfSignedCertificate, type SelfSignedCertificate } from "../http/tls-cert.js";
import type { RecordHandle, RequestRecorder } from "../recorder/recorder.js";
import { redactHeaders } from "../recorder/redact-headers.js";
import { sleep } from "../util/sleep.js";
import { GrpcError, grpcCodeName } from "./status.js";

export type GrpcCallKind = "unary" | "server-stream" | "client-stream" | "bidi";

/** What a gRPC handler gets besides its input. */
export interface GrpcCall {
  readonly kind: GrpcCallKind;
  /** `/pkg.Service/Method`: the route faults and records use. */
  readonly path: string;
  readonly metadata: grpc.Metadata;
  readonly peer: string;
  /** Aborts when the client cancels, the deadline passes, or the server closes. */
  readonly signal: AbortSignal;
  /** The client's deadline (epoch ms), if it set one. */
  readonly deadline: number | undefined;
  readonly record: RecordHandle;
  /** Trailing metadata sent with the final status. */
  readonly trailers: grpc.Metadata;
  /** Sends one response message (server-stream, bidi). */
  write(message: unknown): void;
  /** Leaves the call open without a status (after a suppressed exit frame, `then: 'hang'`). */
  hang(): void;
  takeFault<K extends FaultKind>(kind: K): FaultOf<K> | undefined;
  shouldDrop(kind: "exit-frame"): FaultOf<"exit-frame"> | undefined;
}

/**
 * One handler per method. Unary and server-stream handlers get the request; client-stream and bidi
 * handlers get an async iterable of requests. Unary and client-stream return the response.
 * Throw {@link GrpcError} for a status.
 */
export type GrpcHandler = (input: any, call: GrpcCall) => unknown | Promise<unknown>;

export interface GrpcServerOptions {
  /** `.proto` file(s) to load. */
  protoPath: string | string[];
  includeDirs?: string[];
  /** proto-loader options (default keepCase, longs and enums as String, defaults, oneofs). */
  loaderOptions?: protoLoader.Options;
  /** `{ "pkg.Service": { Method: handler } }`; methods without a handler answer UNIMPLEMENTED. */
  services: Record<string, Record<string, GrpcHandler>>;
  recorder: RequestRecorder;
  faults: FaultInjector;
  /** Runs before every handler: throw GrpcError (see requireGrpcCredential) to refuse. */
  authorize?: (call: GrpcCall) => void | Promise<void>;
  /**
   * Methods refused on purpose, by path (`/pkg.Service/Method`, outside the proto's services) → the reason:
   * answered UNIMPLEMENTED `emulator limit: <reason>` and recorded as unserved (`refused`).
   */
  refused?: Record<string, string>;
  host?: string;
  port?: number;
  /** Serve TLS too (same port, sniffed); `true` makes a self-signed certificate. */
  tls?: boolean | SelfSignedCertificate;
  secretHeaders?: readonly string[];
  onUnexpectedError?: (error: unknown, where: string) => void;
}

export interface GrpcServer {
  /** `http://host:port` (h2c); grpc-js clients dial `host:port` with insecure credentials. */
  readonly url: string;
  readonly secureUrl: string | undefined;
  /** `host:port`, the grpc-js target. */
  readonly target: string;
  readonly port: number;
  readonly certificate: SelfSignedCertificate | undefined;
  readonly packageDefinition: protoLoader.PackageDefinition;
  close(): Promise<void>;
}

const DEFAULT_LOADER: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

/** Starts a grpc-js server on loopback for the given proto services. */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const packageDefinition = protoLoader.loadSync(options.protoPath, { ...DEFAULT_LOADER, ...options.loaderOptions, includeDirs: options.includeDirs });
  const server = new grpc.Server();
  const closing = new AbortController();
  // One listener per call in flight, removed when the call ends: bounded by the calls, not a leak.
  setMaxListeners(0, closing.signal);
  const onUnexpectedError = options.onUnexpectedError ?? defaultUnexpectedError;
  const certificate = options.tls === true ? generateSelfSignedCertificate() : options.tls || undefined;
  let listener: Listener | undefined;

  const cutConnection = (peer: string) => {
    for (const socket of listener?.sockets ?? []) {
      const address = socket.remoteAddress?.includes(":") ? `[${socket.remoteAddress}]` : socket.remoteAddress;
      if (`${socket.remoteAddress}:${socket.remotePort}` === peer || `${address}:${socket.remotePort}` === peer) socket.destroy();
    }
  };

  for (const [serviceName, handlers] of Object.entries(options.services)) {
    const definition = packageDefinition[serviceName];
    if (!definition || !isServiceDefinition(definition)) {
      const known = Object.keys(packageDefinition).filter((name) => isServiceDefinition(packageDefinition[name]!));
      throw new TypeError(`grpc services: ${JSON.stringify(serviceName)} is not a service in the proto (services: ${known.join(", ") || "none"})`);
    }
    for (const method of Object.keys(handlers)) {
      if (!(method in definition)) throw new TypeError(`grpc services.${serviceName}: no method ${JSON.stringify(method)} in the proto`);
    }
    const wrapped: Record<string, grpc.MethodDefinition<object, unknown>> = {};
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const [methodName, method] of Object.entries(definition as protoLoader.ServiceDefinition)) {
      const sizes = new WeakMap<object, number>();
      const deserialize = method.requestDeserialize;
      const serialize = method.responseSerialize;
      wrapped[methodName] = {
        ...method,
        requestDeserialize: (bytes: Buffer) => {
          const value = deserialize(bytes) as object;
          sizes.set(value, bytes.length);
          return value;
        },
        // Handlers' messages arrive pre-serialized (so their bytes are counted once).
        responseSerialize: (value: unknown) => (Buffer.isBuffer(value) ? value : serialize(value as object)),
      } as grpc.MethodDefinition<object, unknown>;
      const kind: GrpcCallKind = method.requestStream ? (method.responseStream ? "bidi" : "client-stream") : method.responseStream ? "server-stream" : "unary";
      implementation[methodName] = (makeImplementation as (init: ImplementationInit) => grpc.UntypedHandleCall)({
        kind,
        path: method.path,
        handler: handlers[methodName],
        sizeOf: (value) => (value && typeof value === "object" ? (sizes.get(value) ?? 0) : 0),
        serialize: (value) => serialize(value as object),
        options,
        closing: closing.signal,
        cutConnection,
        onUnexpectedError,
      });
    }
    server.addService(wrapped as grpc.ServiceDefinition, implementation);
  }

  registerRefusals(server, options);
  recordUnknownMethods(server, options);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  listener = await listen({ http1: (socket) => socket.destroy(), http2: (socket) => injector.injectConnection(socket) }, { host: options.host, port: options.port, tls: certificate, alpn: ["h2"] });
  const authority = listener.host.includes(":") ? `[${listener.host}]` : listener.host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${authority}:${listener.port}`,
    secureUrl: certificate ? `https://${authority}:${listener.port}` : undefined,
    target: `${authority}:${listener.port}`,
    port: listener.port,
    certificate,
    packageDefinition,
    close() {
      closed ??= (async () => {
        closing.abort(new Error("emulator closing"));
        injector.destroy();
        server.forceShutdown();
        await listener!.close();
      })();
      return closed;
    },
  };
}

/** Refused methods get a handler of their own (any message shape: bytes in, nothing out). */
function registerRefusals(server: grpc.Server, options: GrpcServerOptions): void {
  for (const [path, reason] of Object.entries(options.refused ?? {})) {
    const refuse = (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const record = options.recorder.start({
        protocol: "grpc",
        method: "POST",
        route: path,
        path,
        headers: redactHeaders(call.metadata.getMap() as Record<string, string>, options.secretHeaders ?? []),
      });
      record.markUnserved("refused");
      record.finish(grpc.status.UNIMPLEMENTED, grpcCodeName(grpc.status.UNIMPLEMENTED));
      callback({ code: grpc.status.UNIMPLEMENTED, details: `emulator limit: ${reason}` });
    };
    if (
      !server.register(
        path,
        refuse,
        (value: Buffer) => value,
        (bytes: Buffer) => bytes,
        "unary",
      )
    ) {
      throw new TypeError(`grpc refused: ${path} is also a method of the proto's services (refuse it in its handler instead)`);
    }
  }
}

/**
 * grpc-js answers a method outside every service with UNIMPLEMENTED before any handler runs; the
 * recorder must still see the call (a missing method is what a fidelity report looks for). The
 * server's handler lookup (`_retrieveHandler`, grpc-js 1.14) is the one place such a call passes.
 */
function recordUnknownMethods(server: grpc.Server, options: GrpcServerOptions): void {
  const internals = server as unknown as { _retrieveHandler?: (path: string) => unknown };
  const lookup = internals._retrieveHandler;
  if (typeof lookup !== "function") throw new TypeError("emulator-kit: this @grpc/grpc-js has no _retrieveHandler; unknown gRPC methods could not be recorded");
  internals._retrieveHandler = function (this: unknown, path: string) {
    const handler = lookup.call(this, path);
    if (handler === null || handler === undefined) {
      const record = options.recorder.start({ protocol: "grpc", method: "POST", route: null, path: String(path), headers: {} });
      record.markUnserved("not in the proto");
      record.finish(grpc.status.UNIMPLEMENTED, grpcCodeName(grpc.status.UNIMPLEMENTED));
    }
    return handler;
  };
}

interface ImplementationInit {
  kind: GrpcCallKind;
  path: string;
  handler: GrpcHandler | undefined;
  sizeOf(value: unknown): number;
  serialize(value: unknown): Buffer;
  options: GrpcServerOptions;
  closing: AbortSignal;
  cutConnection(peer: string): void;
  onUnexpectedError(error: unknown, where: string): void;
}

type AnyServerCall = grpc.ServerUnaryCall<unknown, unknown> & grpc.ServerDuplexStream<unknown, unknown>;

function makeImplementation(init: ImplementationInit) {
  const { kind, path, options } = init;
  return (call: AnyServerCall, callback?: grpc.sendUnaryData<unknown>) => {
    const record = options.recorder.start({
      protocol: "grpc",
      method: "POST",
      route: path,
      path,
      headers: redactHeaders(call.metadata.getMap() as Record<string, string>, options.secretHeaders ?? []),
    });
    const controller = new AbortController();
    const abort = (reason: string) => controller.abort(new Error(reason));
    // Removed when the call ends: one listener per call on the server-wide signal would pile up.
    const onClosing = () => abort("emulator closing");
    const forgetClosing = () => init.closing.removeEventListener("abort", onClosing);
    call.on("cancelled", () => {
      abort("call cancelled");
      forgetClosing();
      record.finish(grpc.status.CANCELLED, grpcCodeName(grpc.status.CANCELLED));
    });
    if (init.closing.aborted) abort("emulator closing");
    else init.closing.addEventListener("abort", onClosing, { once: true });

    const trailers = new grpc.Metadata();
    let finished = false;
    let hanging = false;
    let sent = 0;
    let drop: FaultOf<"drop-stream"> | undefined;
    const finishWith = (status: grpc.StatusObject | undefined) => {
      if (finished) return;
      finished = true;
      forgetClosing();
      const code = status?.code ?? grpc.status.OK;
      record.finish(code, grpcCodeName(code));
    };
    const fail = (error: unknown) => {
      const status = toStatus(error, path, init.onUnexpectedError);
      finishWith(status);
      if (callback) callback(status);
      else call.emit("error", status);
    };
    const takeFault = <K extends FaultKind>(faultKind: K) => {
      const fault = options.faults.take(faultKind, { route: path, method: "POST" });
      if (fault) record.fault(faultKind);
      return fault;
    };
    const deadline = call.getDeadline();
    const grpcCall: GrpcCall = {
      kind,
      path,
      metadata: call.metadata,
      peer: call.getPeer(),
      signal: controller.signal,
      deadline: deadline instanceof Date ? deadline.getTime() : Number.isFinite(deadline) ? deadline : undefined,
      record,
      trailers,
      write(message) {
        if (finished || hanging || !call.write) return;
        const bytes = init.serialize(message);
        record.messageOut(bytes.length);
        sent++;
        call.write(bytes);
        if (drop && sent >= (drop.afterMessages ?? 1)) {
          finishWith({ code: grpc.status.UNAVAILABLE, details: "dropped", metadata: trailers });
          setImmediate(() => init.cutConnection(grpcCall.peer));
        }
      },
      hang() {
        hanging = true;
      },
      takeFault,
      shouldDrop: (faultKind) => takeFault(faultKind),
    };

    const run = async () => {
      const latency = takeFault("latency");
      if (latency) await sleep(latency.ms, controller.signal);
      const status = takeFault("status");
      if (status) throw new GrpcError(status.grpcCode ?? grpc.status.UNAVAILABLE, status.message ?? "injected fault: service unavailable");
      const limited = takeFault("rate-limit");
      if (limited) {
        const seconds = limited.retryAfterSeconds ?? 1;
        throw new GrpcError(grpc.status.RESOURCE_EXHAUSTED, limited.message ?? "injected fault: rate limited", {
          "retry-after": String(seconds),
          "grpc-retry-pushback-ms": String(seconds * 1000),
        });
      }
      if (takeFault("reset")) {
        finishWith({ code: grpc.status.UNAVAILABLE, details: "reset", metadata: trailers });
        init.cutConnection(grpcCall.peer);
        return;
      }
      await options.authorize?.(grpcCall);
      if (!init.handler) {
        record.markUnserved("no handler");
        throw new GrpcError(grpc.status.UNIMPLEMENTED, `${path} is not implemented by this emulator`);
      }
      if (kind === "server-stream" || kind === "bidi") {
        drop = takeFault("drop-stream");
        if (drop && (drop.afterMessages ?? 1) === 0) {
          finishWith({ code: grpc.status.UNAVAILABLE, details: "dropped", metadata: trailers });
          init.cutConnection(grpcCall.peer);
          return;
        }
      }
      const input = kind === "unary" || kind === "server-stream" ? call.request : requestsOf(call, record, init.sizeOf);
      if (kind === "unary" || kind === "server-stream") record.messageIn(init.sizeOf(call.request));
      const result = await init.handler(input, grpcCall);
      if (finished || controller.signal.aborted) return;
      if (hanging) return;
      if (callback) {
        const bytes = init.serialize(result ?? {});
        record.addBytesOut(bytes.length);
        finishWith(undefined);
        callback(null, bytes, trailers);
      } else {
        finishWith(undefined);
        call.end(trailers);
      }
    };
    run().catch((error) => {
      if (!finished && !controller.signal.aborted) fail(error);
    });
  };
}

async function* requestsOf(call: AnyServerCall, record: RecordHandle, sizeOf: (value: unknown) => number): AsyncGenerator<unknown> {
  // Iterating must not destroy the call when the requests end: a bidi call still has to answer.
  for await (const message of (call as unknown as import("node:stream").Readable).iterator({ destroyOnReturn: false })) {
    record.messageIn(sizeOf(message));
    yield message;
  }
}

function toStatus(error: unknown, path: string, onUnexpectedError: (error: unknown, where: string) => void): grpc.StatusObject {
  if (error instanceof GrpcError) return error.toStatus();
  onUnexpectedError(error, `gRPC ${path}`);
  return { code: grpc.status.INTERNAL, details: "internal emulator error", metadata: new grpc.Metadata() };
}

function isServiceDefinition(value: unknown): value is protoLoader.ServiceDefinition {
  if (!value || typeof value !== "object" || "format" in value) return false;
  return Object.values(value as Record<string, unknown>).every((method) => typeof method === "object" && method !== null && "path" in method);
}
