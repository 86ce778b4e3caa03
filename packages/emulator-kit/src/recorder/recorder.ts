import type { FaultKind } from "../faults/types.js";

/** `ssh`: an SSH connection (`CONNECT`, recorded when accepted) or a session on one (`EXEC`, `SHELL`). */
export type RequestProtocol = "http" | "ws" | "grpc" | "ssh";

/** One finished (or still running) vendor call as the emulator saw it. */
export interface RequestRecord {
  /** Monotonic id, in start order. */
  readonly id: number;
  readonly protocol: RequestProtocol;
  /** HTTP method (`GET`…); `POST` for gRPC; `GET` for a WebSocket upgrade. */
  readonly method: string;
  /** The route pattern that matched (`/sandboxes/:id`, `/pkg.Service/Method`), `null` when none did. */
  readonly route: string | null;
  /** Request path without its query string (query values may carry signatures). */
  readonly path: string;
  /** HTTP status (101 for an accepted WebSocket); the numeric status code for gRPC. */
  status: number;
  /** Protocol-level code when there is one: the gRPC code name, the Connect error code. */
  code?: string;
  /** Payload bytes received / sent: bodies, WebSocket message payloads, gRPC message bytes. */
  bytesIn: number;
  bytesOut: number;
  /** Messages received / sent on streams (WebSocket, Connect and gRPC streams, SSE events). */
  messagesIn: number;
  messagesOut: number;
  /** Wall time from the request's arrival to its end (response finished, socket closed). */
  latencyMs: number;
  /** Epoch milliseconds at arrival. */
  readonly startedAt: number;
  /** Faults applied to this call, in order. */
  readonly faults: FaultKind[];
  /** Request headers (gRPC metadata) with credential values redacted. */
  readonly headers: Record<string, string>;
  /** False while the call is still running. */
  done: boolean;
  /**
   * Why the emulator did not serve this call, when it did not: no route (`no route`), a method the
   * route does not take, a gRPC method outside its proto or without a handler, an UNIMPLEMENTED /
   * 501 answer, or a reason the emulator gave. Undefined for a served call (errors included).
   */
  unserved?: string;
  /** Free-form notes an emulator adds (`sandboxId`, …); never put secrets here. */
  readonly notes: Record<string, string | number | boolean>;
}

export interface RecordFilter {
  protocol?: RequestProtocol;
  method?: string;
  route?: string | null;
  status?: number;
  /** Only records with an id greater than this mark (see {@link RequestRecorder.mark}). */
  since?: number;
  /** Include calls still running (default false). */
  includeRunning?: boolean;
  /** Only calls the emulator did not serve (true) or did (false). */
  unserved?: boolean;
}

/** Unserved calls grouped by what was asked, for a bench's report. */
export interface UnservedCall {
  protocol: RequestProtocol;
  method: string;
  /** The route pattern when one matched, else the path. */
  target: string;
  reason: string;
  count: number;
}

interface StartRecord {
  protocol: RequestProtocol;
  method: string;
  route: string | null;
  path: string;
  headers: Record<string, string>;
}

/** The live handle a server updates while a call runs. */
export interface RecordHandle {
  readonly record: RequestRecord;
  addBytesIn(n: number): void;
  addBytesOut(n: number): void;
  messageIn(bytes: number): void;
  messageOut(bytes: number): void;
  fault(kind: FaultKind): void;
  note(key: string, value: string | number | boolean): void;
  /** Sets the protocol-level code (gRPC code name, Connect error code) ahead of finish. */
  setCode(code: string): void;
  /** Marks the call as one the emulator does not serve (the first reason given is kept). */
  markUnserved(reason: string): void;
  /** Ends the record once; later calls are ignored. */
  finish(status: number, code?: string): void;
}

export interface RequestRecorder {
  /** Called by servers when a call arrives. */
  start(init: StartRecord): RecordHandle;
  /** Finished records (or running ones with `includeRunning`) matching the filter, oldest first. */
  list(filter?: RecordFilter): RequestRecord[];
  count(filter?: RecordFilter): number;
  /** Finished calls the emulator did not serve, grouped by protocol, method, target and reason. */
  unserved(filter?: Omit<RecordFilter, "unserved">): UnservedCall[];
  /** The id of the latest record so far: pass as `since` to see only what comes after. */
  mark(): number;
  /** Resolves when no call is running (or rejects after `timeoutMs`). */
  idle(timeoutMs?: number): Promise<void>;
  /** Forgets every record (running calls still finish, but are no longer listed). */
  reset(): void;
}

export interface RecorderOptions {
  /** Injectable clock for tests; epoch ms. */
  now?: () => number;
  /** Cap on kept records; the oldest are dropped beyond it (default 100,000). */
  maxRecords?: number;
}

export function createRequestRecorder(options: RecorderOptions = {}): RequestRecorder {
  const now = options.now ?? Date.now;
  const maxRecords = options.maxRecords ?? 100_000;
  let records: RequestRecord[] = [];
  let nextId = 1;
  let running = 0;
  let idleWaiters: Array<() => void> = [];

  const settle = () => {
    if (running !== 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const wake of waiters) wake();
  };

  const matches = (record: RequestRecord, filter: RecordFilter) =>
    (filter.includeRunning || record.done) &&
    (filter.protocol === undefined || record.protocol === filter.protocol) &&
    (filter.method === undefined || record.method === filter.method.toUpperCase()) &&
    (filter.route === undefined || record.route === filter.route) &&
    (filter.status === undefined || record.status === filter.status) &&
    (filter.since === undefined || record.id > filter.since) &&
    (filter.unserved === undefined || (record.unserved !== undefined) === filter.unserved);

  return {
    start(init) {
      const startedAt = now();
      const record: RequestRecord = {
        id: nextId++,
        protocol: init.protocol,
        method: init.method.toUpperCase(),
        route: init.route,
        path: init.path,
        status: 0,
        bytesIn: 0,
        bytesOut: 0,
        messagesIn: 0,
        messagesOut: 0,
        latencyMs: 0,
        startedAt,
        faults: [],
        headers: init.headers,
        done: false,
        notes: {},
      };
      records.push(record);
      if (records.length > maxRecords) records = records.slice(records.length - maxRecords);
      running++;
      const started = performance.now();
      let finished = false;
      return {
        record,
        addBytesIn: (n) => void (record.bytesIn += n),
        addBytesOut: (n) => void (record.bytesOut += n),
        messageIn(bytes) {
          record.messagesIn++;
          record.bytesIn += bytes;
        },
        messageOut(bytes) {
          record.messagesOut++;
          record.bytesOut += bytes;
        },
        fault: (kind) => void record.faults.push(kind),
        note: (key, value) => void (record.notes[key] = value),
        setCode: (code) => void (record.code = code),
        markUnserved: (reason) => void (record.unserved ??= reason),
        finish(status, code) {
          if (finished) return;
          finished = true;
          record.status = status;
          if (code !== undefined) record.code = code;
          // UNIMPLEMENTED (gRPC 12, Connect "unimplemented") and HTTP 501 say "not served" whoever answered.
          if (record.code === "UNIMPLEMENTED" || record.code === "unimplemented" || (record.protocol !== "grpc" && status === 501)) record.unserved ??= "unimplemented";
          record.latencyMs = performance.now() - started;
          record.done = true;
          running--;
          settle();
        },
      };
    },
    list: (filter = {}) => records.filter((record) => matches(record, filter)).map(copyRecord),
    count: (filter = {}) => records.filter((record) => matches(record, filter)).length,
    unserved(filter = {}) {
      const groups = new Map<string, UnservedCall>();
      for (const record of records) {
        if (!matches(record, { ...filter, unserved: true })) continue;
        const target = record.route ?? record.path;
        const key = `${record.protocol} ${record.method} ${target} ${record.unserved}`;
        const group = groups.get(key);
        if (group) group.count += 1;
        else groups.set(key, { protocol: record.protocol, method: record.method, target, reason: record.unserved!, count: 1 });
      }
      return [...groups.values()];
    },
    mark: () => nextId - 1,
    idle(timeoutMs = 5_000) {
      if (running === 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          idleWaiters = idleWaiters.filter((waiter) => waiter !== wake);
          reject(new Error(`recorder.idle: ${running} call(s) still running after ${timeoutMs} ms`));
        }, timeoutMs);
        const wake = () => {
          clearTimeout(timer);
          resolve();
        };
        idleWaiters.push(wake);
      });
    },
    reset() {
      records = [];
    },
  };
}

function copyRecord(record: RequestRecord): RequestRecord {
  return { ...record, faults: [...record.faults], headers: { ...record.headers }, notes: { ...record.notes } };
}
