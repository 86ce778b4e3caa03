import grpc from "@grpc/grpc-js";
import { createSecretRedactor, createVendorCall, isProviderApiError, type Redactor } from "@paperclip-sandbox/kit";
import { checkExchangeUrl, parseApiUrl } from "./endpoint.js";
import { boxdCode, boxdError } from "./errors.js";
import type { TokenCache, TokenSource } from "./tokens.js";
import { boxdServiceClient, type CreatedWire, type ExecChunkWire, type VmWire } from "./wire.js";

/** A machine as boxd reports it. */
export interface BoxdMachine {
  id: string;
  name: string;
  /** running, suspended, hibernated, stopped, destroying, destroyed, failed, or a transitional state. */
  status: string;
  imageRef: string;
  vcpu: number;
  memoryBytes: number;
  labels: Record<string, string>;
  org: string;
  isolated: boolean;
  createdAt: Date | null;
  /** The delete timer's deadline, when one is set. */
  destroyAt: Date | null;
}

export interface BoxdSnapshot {
  name: string;
  version: number;
  /** pending, ready or failed. */
  status: string;
  vcpu: number;
  memoryBytes: number;
  sizeBytes: number;
}

export interface CreateMachineSpec {
  name: string;
  labels: Record<string, string>;
  org?: string;
  vcpu?: number;
  /** Restore from this snapshot (its size is kept). */
  snapshot?: string;
}

export interface ExecOutput {
  stdout(chunk: Buffer): void | Promise<void>;
  stderr(chunk: Buffer): void | Promise<void>;
}

/** One running `Exec` call. */
export interface ExecCall {
  /** One stdin chunk; resolves once handed to the transport (back-pressure). */
  write(chunk: Buffer): Promise<void>;
  /** Half-close: the command sees EOF. */
  end(): void;
  /** Cancels the call; boxd ends the command's process group. */
  cancel(): void;
  /** The command's exit code once every output chunk was handed over; rejects when the stream broke. */
  readonly exited: Promise<{ exitCode: number | null; cancelled: boolean }>;
}

/**
 * What the provider needs of boxd's API, small enough to fake: machines, their states and timers,
 * commands, files. The real one speaks gRPC to `boxd.api.v1.BoxdApi` (`createBoxdApi`).
 */
export interface BoxdApi {
  readonly redact: Redactor;
  /** The account the API key belongs to (the exchange's `user_id`). */
  account(signal?: AbortSignal): Promise<string>;
  whoami(signal?: AbortSignal): Promise<{ userId: string; displayName: string }>;
  createMachine(spec: CreateMachineSpec, signal?: AbortSignal): Promise<{ id: string; name: string; status: string }>;
  /** null when boxd does not know it (unknown, another org's, or destroyed). */
  getMachine(idOrName: string, signal?: AbortSignal): Promise<BoxdMachine | null>;
  listMachines(filter: { org?: string; labels?: Record<string, string> }, signal?: AbortSignal): Promise<BoxdMachine[]>;
  /** Asks for the machine's deletion; a machine already gone is success. Deletion completes later. */
  destroyMachine(id: string, signal?: AbortSignal): Promise<void>;
  startMachine(id: string, signal?: AbortSignal): Promise<void>;
  stopMachine(id: string, signal?: AbortSignal): Promise<void>;
  suspendMachine(id: string, signal?: AbortSignal): Promise<{ suspendUs: number }>;
  hibernateMachine(id: string, signal?: AbortSignal): Promise<void>;
  resumeMachine(id: string, signal?: AbortSignal): Promise<{ resumeUs: number }>;
  /** The delete timer: boxd destroys the machine `seconds` from now (0 turns it off). */
  setDeleteTimer(id: string, seconds: number, signal?: AbortSignal): Promise<void>;
  /** With `tty`: the command on a pseudo-terminal (its output one stream, stdin what is typed). */
  exec(id: string, command: string, output: ExecOutput, options?: { tty?: boolean }): Promise<ExecCall>;
  /** A snapshot of a running machine's disk (and memory, at boxd), saved under `name` (latest version only). */
  createSnapshot(vm: string, name: string, signal?: AbortSignal): Promise<BoxdSnapshot>;
  /** null when there is no snapshot of that name. */
  getSnapshot(name: string, org?: string, signal?: AbortSignal): Promise<BoxdSnapshot | null>;
  deleteSnapshot(name: string, org?: string, signal?: AbortSignal): Promise<void>;
  /** The newer file API: the file is created with `mode`. UNIMPLEMENTED on machines whose agent predates it. */
  writeFile(id: string, path: string, data: Buffer, mode: number, signal?: AbortSignal): Promise<void>;
  /** The old upload: the file lands 0644, parents made. */
  uploadFile(id: string, path: string, data: Buffer, signal?: AbortSignal): Promise<void>;
  close(): void;
}

export interface BoxdApiOptions {
  apiKey: string;
  apiUrl: string;
  exchangeUrl: string;
  tokens: TokenCache;
  /** Per-call deadline of unary calls (default 30 s). */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;
/** Bytes per stdin or upload message: well under boxd's (and grpc-js's default) 4 MiB message limit. */
const MESSAGE_CHUNK_BYTES = 1024 * 1024;
/** What a retried idempotent call may spend in all. */
const RETRY = { attempts: 4, totalMs: 60_000 } as const;

type Unary = (request: object, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: unknown) => void) => grpc.ClientUnaryCall;

const machineOf = (vm: VmWire): BoxdMachine => ({
  id: vm.vm_id,
  name: vm.name,
  status: vm.status,
  imageRef: vm.image_ref,
  vcpu: vm.vcpu,
  memoryBytes: Number(vm.memory_bytes),
  labels: { ...vm.labels },
  org: vm.org,
  isolated: vm.isolated,
  createdAt: vm.created_at_unix ? new Date(Number(vm.created_at_unix) * 1000) : null,
  destroyAt: vm.destroy_at_unix ? new Date(Number(vm.destroy_at_unix) * 1000) : null,
});

/** boxd's API over `@grpc/grpc-js`, bearer JWTs from the token cache (one exchange per key). */
export function createBoxdApi(options: BoxdApiOptions): BoxdApi {
  const endpoint = parseApiUrl(options.apiUrl);
  const tokens: TokenSource = options.tokens.forKey(options.apiKey, checkExchangeUrl(options.exchangeUrl));
  const Client = boxdServiceClient();
  const client = new Client(endpoint.target, endpoint.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure(), {
    // Retries are the provider's (idempotent calls only); grpc-js must not repeat a create.
    "grpc.enable_retries": 0,
    "grpc.max_receive_message_length": 16 * 1024 * 1024,
    "grpc.keepalive_time_ms": 30_000,
  });
  const redactor = createSecretRedactor([options.apiKey]);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

  /** Bearer metadata; the token itself is redacted from every later message. */
  const metadata = async (signal?: AbortSignal): Promise<{ metadata: grpc.Metadata; token: string }> => {
    const held = await tokens.current(signal);
    redactor.add(held.token);
    const md = new grpc.Metadata();
    md.set("authorization", `Bearer ${held.token}`);
    return { metadata: md, token: held.token };
  };

  /** One unary call; a token boxd refused is exchanged again once. */
  const once = async <T>(method: string, request: object, signal: AbortSignal | undefined, deadlineMs: number): Promise<T> => {
    for (let attempt = 0; ; attempt += 1) {
      const { metadata: md, token } = await metadata(signal);
      let abort: (() => void) | undefined;
      try {
        return await new Promise<T>((resolve, reject) => {
          const call = (client[method] as Unary).call(client, request, md, { deadline: Date.now() + deadlineMs }, (error, response) => (error ? reject(error) : resolve(response as T)));
          abort = () => call.cancel();
          if (signal?.aborted) abort();
          else signal?.addEventListener("abort", abort, { once: true });
        });
      } catch (error) {
        if (attempt === 0 && boxdCode(error) === "unauthenticated") {
          tokens.invalidate(token);
          continue;
        }
        throw boxdError(method, error, redactor.redact);
      } finally {
        // The signal may outlive the call (a poll's, an acquire's): one listener per call would pile up.
        if (abort) signal?.removeEventListener("abort", abort);
      }
    }
  };

  /** The kit's one vendor-call wrapper: failures typed by `boxdError`, retried as they allow. */
  const call = createVendorCall({ translate: (error, operation) => boxdError(operation, error, redactor.redact), retry: RETRY });

  const unary = <T>(method: string, request: object, opts: { idempotent: boolean; signal?: AbortSignal }): Promise<T> =>
    call(method, ({ remainingMs }) => once<T>(method, request, opts.signal, Math.min(timeoutMs, remainingMs)), { idempotent: opts.idempotent, ...(opts.signal ? { signal: opts.signal } : {}) });

  const chunks = (data: Buffer): Buffer[] => {
    const out: Buffer[] = [];
    for (let at = 0; at < data.length; at += MESSAGE_CHUNK_BYTES) out.push(data.subarray(at, at + MESSAGE_CHUNK_BYTES));
    return out;
  };

  /** A client-streaming upload: the head message, then the data in chunks. */
  const upload = async (method: "WriteFile" | "UploadFileStream", head: Record<string, unknown>, data: Buffer, signal: AbortSignal | undefined): Promise<void> => {
    for (let attempt = 0; ; attempt += 1) {
      const { metadata: md, token } = await metadata(signal);
      let abort: (() => void) | undefined;
      try {
        await new Promise<void>((resolve, reject) => {
          const call = (
            client[method] as (md: grpc.Metadata, options: grpc.CallOptions, cb: (error: grpc.ServiceError | null, response?: { bytes_written: number }) => void) => grpc.ClientWritableStream<object>
          ).call(client, md, { deadline: Date.now() + Math.max(timeoutMs, Math.ceil(data.length / 1_000_000) * 1000 + timeoutMs) }, (error, response) => {
            if (error) return reject(error);
            if (Number(response?.bytes_written ?? -1) !== data.length)
              return reject(Object.assign(new Error(`boxd acknowledged ${response?.bytes_written} of ${data.length} bytes`), { code: grpc.status.DATA_LOSS }));
            resolve();
          });
          abort = () => call.cancel();
          if (signal?.aborted) abort();
          else signal?.addEventListener("abort", abort, { once: true });
          const parts = chunks(data);
          call.write({ ...head, total_size: data.length, data: parts[0] ?? Buffer.alloc(0) });
          for (const part of parts.slice(1)) call.write({ data: part });
          call.end();
        });
        return;
      } catch (error) {
        if (attempt === 0 && boxdCode(error) === "unauthenticated") {
          tokens.invalidate(token);
          continue;
        }
        throw boxdError(method, error, redactor.redact);
      } finally {
        if (abort) signal?.removeEventListener("abort", abort);
      }
    }
  };

  const api: BoxdApi = {
    redact: (text) => redactor.redact(text),
    async account(signal) {
      return (await tokens.current(signal)).userId;
    },
    async whoami(signal) {
      const r = await unary<{ user_id: string; display_name: string }>("Whoami", {}, { idempotent: true, signal });
      return { userId: r.user_id, displayName: r.display_name };
    },
    async createMachine(spec, signal) {
      const config = { vcpu: spec.vcpu ?? 0, memory_bytes: 0, disk_bytes: 0 };
      const [method, request] = spec.snapshot
        ? ["CreateVmFromSnapshot", { snapshot: spec.snapshot, name: spec.name, config, org: spec.org ?? "", isolated: true, labels: spec.labels }]
        : ["CreateVm", { name: spec.name, config, org: spec.org ?? "", isolated: true, labels: spec.labels, restart_policy: "never" }];
      // Idempotent by name: the name is unique to this lease, so a retry whose first attempt took
      // effect meets ALREADY_EXISTS, and the machine of that name carrying the same labels is ours.
      const created = await call(
        method,
        async ({ attempt, remainingMs }) => {
          try {
            return await once<CreatedWire>(method, request, signal, Math.min(timeoutMs, remainingMs));
          } catch (error) {
            if (attempt === 1 || !(isProviderApiError(error) && error.code === "already_exists")) throw error;
            const found = await once<VmWire>("GetVm", { vm_id: spec.name }, signal, timeoutMs);
            const same = Object.entries(spec.labels).every(([key, value]) => found.labels?.[key] === value);
            if (!same) throw error;
            return { vm_id: found.vm_id, name: found.name, status: found.status, url: "", boot_time_ms: 0 };
          }
        },
        { idempotent: true, ...(signal ? { signal } : {}) },
      );
      return { id: created.vm_id, name: created.name, status: created.status };
    },
    async getMachine(idOrName, signal) {
      try {
        return machineOf(await unary<VmWire>("GetVm", { vm_id: idOrName }, { idempotent: true, signal }));
      } catch (error) {
        if (isProviderApiError(error) && error.gone) return null;
        throw error;
      }
    },
    async listMachines(filter, signal) {
      const r = await unary<{ vms: VmWire[] }>("ListVms", { org: filter.org ?? "", labels: filter.labels ?? {} }, { idempotent: true, signal });
      return r.vms.map(machineOf);
    },
    async destroyMachine(id, signal) {
      try {
        await unary("DestroyVm", { vm_id: id }, { idempotent: true, signal });
      } catch (error) {
        if (isProviderApiError(error) && error.gone) return;
        throw error;
      }
    },
    startMachine: async (id, signal) => void (await unary("StartVm", { vm_id: id }, { idempotent: false, signal })),
    stopMachine: async (id, signal) => void (await unary("StopVm", { vm_id: id }, { idempotent: false, signal })),
    async suspendMachine(id, signal) {
      const r = await unary<{ suspend_us: number }>("SuspendVm", { vm_id: id }, { idempotent: true, signal });
      return { suspendUs: Number(r.suspend_us) };
    },
    hibernateMachine: async (id, signal) => void (await unary("HibernateVm", { vm_id: id }, { idempotent: true, signal })),
    async resumeMachine(id, signal) {
      const r = await unary<{ resume_us: number }>("ResumeVm", { vm_id: id }, { idempotent: true, signal });
      return { resumeUs: Number(r.resume_us) };
    },
    setDeleteTimer: async (id, seconds, signal) => void (await unary("SetAutoDestroyTimeout", { vm_id: id, timeout_secs: Math.max(0, Math.floor(seconds)) }, { idempotent: true, signal })),

    async exec(id, command, output, options = {}) {
      const { metadata: md } = await metadata();
      const call = (client.Exec as (md: grpc.Metadata, options?: grpc.CallOptions) => grpc.ClientDuplexStream<object, ExecChunkWire>).call(client, md, {});
      let cancelled = false;
      let exitCode: number | undefined;
      const exited = new Promise<{ exitCode: number | null; cancelled: boolean }>((resolve, reject) => {
        call.on("data", (chunk: ExecChunkWire) => {
          if (chunk.stdin) return;
          const data = chunk.data ?? Buffer.alloc(0);
          // The last message: no output, the exit code (a command that printed nothing still gets one).
          if (data.length === 0) {
            exitCode = chunk.exit_code;
            return;
          }
          const pending = chunk.is_stderr ? output.stderr(data) : output.stdout(data);
          if (pending) {
            call.pause();
            void pending.then(
              () => call.resume(),
              () => call.resume(),
            );
          }
        });
        call.on("error", (error: grpc.ServiceError) => {
          if (cancelled && error.code === grpc.status.CANCELLED) resolve({ exitCode: null, cancelled: true });
          else reject(boxdError("Exec", error, redactor.redact));
        });
        // Done once the status is OK and every message was read: with back-pressure (a paused
        // stream) the status can arrive before the last buffered messages are handed over.
        let statusOk = false;
        let ended = false;
        const finish = () => {
          if (!statusOk || !ended) return;
          if (exitCode === undefined)
            reject(
              boxdError(
                "Exec",
                Object.assign(new Error("the command's exit was not reported (the stream ended without it)"), { code: grpc.status.UNAVAILABLE, details: "the command's exit was not reported" }),
                redactor.redact,
              ),
            );
          else resolve({ exitCode, cancelled: false });
        };
        call.on("status", (status: grpc.StatusObject) => {
          if (status.code !== grpc.status.OK) return; // reported by "error"
          statusOk = true;
          finish();
        });
        call.on("end", () => {
          ended = true;
          finish();
        });
      });
      // Errors surface through `exited`; a write after the end is dropped.
      exited.catch(() => undefined);
      call.write({ vm_id: id, command, ...(options.tty ? { tty: true } : {}) });
      return {
        write: (chunk) =>
          new Promise<void>((resolve, reject) => {
            if (call.writableEnded || call.destroyed) return reject(new Error("stdin is closed"));
            call.write({ stdin: true, data: chunk }, (error: Error | null | undefined) => (error ? reject(error) : resolve()));
          }),
        end: () => {
          if (!call.writableEnded) call.end();
        },
        cancel: () => {
          cancelled = true;
          call.cancel();
        },
        exited,
      };
    },

    async createSnapshot(vm, name, signal) {
      const r = await unary<{ name: string; version: number; status: string }>("CreateSnapshot", { vm, name }, { idempotent: false, signal });
      return { name: r.name, version: Number(r.version), status: r.status, vcpu: 0, memoryBytes: 0, sizeBytes: 0 };
    },
    async getSnapshot(name, org, signal) {
      try {
        const r = await unary<{ snapshot: { name: string; version: number; status: string; vcpu: number; memory_bytes: number; size_bytes: number } | null }>(
          "GetSnapshot",
          { name, org: org ?? "" },
          { idempotent: true, signal },
        );
        const s = r.snapshot;
        return s ? { name: s.name, version: Number(s.version), status: s.status, vcpu: s.vcpu, memoryBytes: Number(s.memory_bytes), sizeBytes: Number(s.size_bytes) } : null;
      } catch (error) {
        if (isProviderApiError(error) && error.gone) return null;
        throw error;
      }
    },
    async deleteSnapshot(name, org, signal) {
      try {
        await unary("DeleteSnapshot", { name, org: org ?? "" }, { idempotent: true, signal });
      } catch (error) {
        if (!(isProviderApiError(error) && error.gone)) throw error;
      }
    },
    writeFile: (id, path, data, mode, signal) => upload("WriteFile", { vm_id: id, path, mode }, data, signal),
    uploadFile: (id, path, data, signal) => upload("UploadFileStream", { vm_id: id, path }, data, signal),
    close: () => client.close(),
  };
  return api;
}
