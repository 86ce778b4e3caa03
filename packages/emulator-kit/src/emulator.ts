import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startEmulatorBackend, type EmulatorBackend, type EmulatorBackendOptions } from "./backend.js";
import { createFaultInjector, type FaultInjector } from "./faults/injector.js";
import { startGrpcServer, type GrpcServer, type GrpcServerOptions } from "./grpc/server.js";
import type { Router } from "./http/router.js";
import { startHttpServer, type HttpServer, type HttpServerOptions } from "./http/server.js";
import { generateSelfSignedCertificate, type SelfSignedCertificate } from "./http/tls-cert.js";
import { createRequestRecorder, type RequestRecorder } from "./recorder/recorder.js";
import { startSshServer, type SshServer, type SshServerOptions } from "./ssh/server.js";

/** What an emulator's `start` gets from the kit: shared recorder and faults, and server starters. */
export interface EmulatorKitContext {
  readonly name: string;
  readonly host: string;
  readonly recorder: RequestRecorder;
  readonly faults: FaultInjector;
  /** Starts an HTTP server (h1, h2c, WebSockets; TLS with `tls: true`) closed with the emulator. */
  http(router: Router, options?: Pick<HttpServerOptions, "port" | "tls" | "secretHeaders" | "onUnexpectedError" | "internal">): Promise<HttpServer>;
  /** Starts a gRPC server closed with the emulator. */
  grpc(options: Omit<GrpcServerOptions, "recorder" | "faults" | "host">): Promise<GrpcServer>;
  /** The emulator's one self-signed certificate (made on first use); `tls: true` servers use it. */
  certificate(): SelfSignedCertificate;
  /** Writes the certificate to a temp file (removed on close) for NODE_EXTRA_CA_CERTS. */
  caFile(): Promise<string>;
  /** A fresh random credential, e.g. `credential("e2b_")`. */
  credential(prefix?: string): string;
  /** Cleanup run on close, last registered first. */
  onClose(cleanup: () => void | Promise<void>): void;
  /** Starts a real OpenSSH server (see `startSshServer`) with this emulator's recorder and faults, closed with it. */
  ssh(options: Omit<SshServerOptions, "recorder" | "faults">): Promise<SshServer>;
  /**
   * A sandbox backend for this emulator's jails: a short state directory (`/tmp/<name>-XXXXXX`,
   * 0711 under root so the jails' host uid can pass), closed and removed with the emulator (after
   * the emulator's own `close`, which should destroy its sandboxes).
   */
  backend(options?: EmulatorBackendOptions): Promise<EmulatorBackend>;
}

/** What an emulator's `start` returns. */
export interface EmulatorParts {
  /** The base URL an SDK is pointed at. */
  url: string;
  /** Further named URLs (a data plane, a gRPC target). */
  endpoints?: Record<string, string>;
  /** Credentials the SDK needs: `{ apiKey }`, `{ token }`… */
  credentials: Record<string, string>;
  /** Environment an SDK or CLI reads (E2B_API_URL, E2B_API_KEY…), for printing and child processes. */
  env?: Record<string, string>;
  /** What the emulator still holds: live sandboxes, sessions. Empty means nothing leaked. */
  leftovers?(): Promise<string[]>;
  /** Stops the emulator's own work; the kit then stops its servers. */
  close?(): Promise<void>;
}

export interface EmulatorDefinition<Options = Record<string, unknown>> {
  readonly name: string;
  /** One line for listings (`paperclip-sandbox emulate --list`). */
  readonly description: string;
  start(kit: EmulatorKitContext, options: Options): Promise<EmulatorParts>;
}

export interface StartEmulatorOptions<Options = Record<string, unknown>> {
  /** Default 127.0.0.1. */
  host?: string;
  /** The emulator's own options. */
  options?: Options;
  /** Randomness for fault probabilities (seed it for repeatable runs). */
  random?: () => number;
}

/** A running emulator: the shape the conformance suite and the CLI take. */
export interface RunningEmulator {
  readonly name: string;
  readonly url: string;
  readonly endpoints: Readonly<Record<string, string>>;
  readonly credentials: Readonly<Record<string, string>>;
  readonly env: Readonly<Record<string, string>>;
  /** Every vendor call, queryable and resettable. */
  readonly requests: RequestRecorder;
  /** Fault switches, per route, at run time. */
  readonly faults: FaultInjector;
  /** The self-signed certificate's PEM when any server serves TLS. */
  readonly caPem: string | undefined;
  leftovers(): Promise<string[]>;
  /** Stops everything it started; idempotent. */
  close(): Promise<void>;
}

/** Starts one emulator definition with a fresh recorder and fault injector. */
export async function runEmulator<Options>(definition: EmulatorDefinition<Options>, start: StartEmulatorOptions<Options> = {}): Promise<RunningEmulator> {
  const host = start.host ?? "127.0.0.1";
  const recorder = createRequestRecorder();
  const faults = createFaultInjector({ random: start.random });
  const cleanups: Array<() => void | Promise<void>> = [];
  let certificate: SelfSignedCertificate | undefined;
  let usesTls = false;
  let caPath: string | undefined;

  const kit: EmulatorKitContext = {
    name: definition.name,
    host,
    recorder,
    faults,
    async http(router, options = {}) {
      const tls = options.tls === true ? kit.certificate() : options.tls;
      usesTls ||= Boolean(tls);
      const server = await startHttpServer({ ...options, router, recorder, faults, host, tls });
      cleanups.push(() => server.close());
      return server;
    },
    async grpc(options) {
      const tls = options.tls === true ? kit.certificate() : options.tls;
      usesTls ||= Boolean(tls);
      const server = await startGrpcServer({ ...options, recorder, faults, host, tls });
      cleanups.push(() => server.close());
      return server;
    },
    certificate() {
      certificate ??= generateSelfSignedCertificate();
      return certificate;
    },
    async caFile() {
      if (caPath) return caPath;
      const dir = await mkdtemp(join(tmpdir(), `emulator-${definition.name}-`));
      cleanups.push(() => rm(dir, { recursive: true, force: true }));
      caPath = join(dir, "ca.pem");
      await writeFile(caPath, kit.certificate().certPem, { mode: 0o600 });
      return caPath;
    },
    credential: (prefix = "") => `${prefix}${randomBytes(18).toString("base64url")}`,
    onClose(cleanup) {
      cleanups.push(cleanup);
    },
    async ssh(options) {
      const server = await startSshServer({ ...options, recorder, faults });
      cleanups.push(() => server.close());
      return server;
    },
    async backend(options = {}) {
      const started = await startEmulatorBackend(definition.name, options);
      cleanups.push(() => started.close());
      return started;
    },
  };

  const closeAll = async (parts?: EmulatorParts) => {
    const errors: unknown[] = [];
    try {
      await parts?.close?.();
    } catch (error) {
      errors.push(error);
    }
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        errors.push(error);
      }
    }
    cleanups.length = 0;
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `emulator ${definition.name}: ${errors.length} errors while closing`);
  };

  let parts: EmulatorParts;
  try {
    parts = await definition.start(kit, (start.options ?? {}) as Options);
  } catch (error) {
    await closeAll().catch(() => undefined);
    throw error;
  }

  let closed: Promise<void> | undefined;
  return {
    name: definition.name,
    url: parts.url,
    endpoints: { ...parts.endpoints },
    credentials: { ...parts.credentials },
    env: { ...parts.env },
    requests: recorder,
    faults,
    caPem: usesTls ? kit.certificate().certPem : undefined,
    leftovers: () => parts.leftovers?.() ?? Promise.resolve([]),
    close() {
      closed ??= closeAll(parts);
      return closed;
    },
  };
}

export interface EmulatorRegistry {
  names(): string[];
  get(name: string): EmulatorDefinition<any> | undefined;
  /** `[{name, description}]` for listings. */
  describe(): Array<{ name: string; description: string }>;
  /** Starts the named emulator; an unknown name throws, listing the known ones. */
  startEmulator<Options = Record<string, unknown>>(name: string, options?: StartEmulatorOptions<Options>): Promise<RunningEmulator>;
}

/** A registry over emulator definitions (no module-level state: the caller builds it). */
export function createEmulatorRegistry(definitions: ReadonlyArray<EmulatorDefinition<any>>): EmulatorRegistry {
  const byName = new Map<string, EmulatorDefinition<any>>();
  for (const definition of definitions) {
    if (!/^[a-z0-9][a-z0-9-]*$/.test(definition.name)) {
      throw new TypeError(`emulator name: must be lower-case letters, digits and dashes (got ${JSON.stringify(definition.name)})`);
    }
    if (byName.has(definition.name)) throw new TypeError(`emulator name: ${JSON.stringify(definition.name)} is registered twice`);
    byName.set(definition.name, definition);
  }
  return {
    names: () => [...byName.keys()].sort(),
    get: (name) => byName.get(name),
    describe: () => [...byName.values()].map(({ name, description }) => ({ name, description })).sort((a, b) => a.name.localeCompare(b.name)),
    startEmulator(name, options) {
      const definition = byName.get(name);
      if (!definition) {
        return Promise.reject(new Error(`unknown emulator ${JSON.stringify(name)} (known: ${[...byName.keys()].sort().join(", ") || "none"})`));
      }
      return runEmulator(definition, options);
    },
  };
}
