import { FAULT_KINDS, type FaultKind, type FaultOf, type FaultSpec } from "./types.js";

export interface FaultHandle {
  readonly id: number;
  readonly spec: Readonly<FaultSpec>;
  /** Times this fault was applied. */
  readonly hits: number;
  /** Applications left (`Infinity` without `times`). */
  readonly remaining: number;
  remove(): void;
}

export interface AppliedFault {
  readonly faultId: number;
  readonly kind: FaultKind;
  readonly route: string | null;
  readonly method: string | undefined;
  readonly at: number;
}

export interface FaultTarget {
  route: string | null;
  method?: string;
  /** A call between the vendor's own parts (behind its API): a fault on `*` passes it by. */
  internal?: boolean;
}

export interface FaultInjector {
  /** Arms a fault; it takes effect on the next matching call. */
  inject(spec: FaultSpec): FaultHandle;
  /**
   * Consumes one application of the first armed fault of `kind` matching the call, if any. Servers
   * call this; emulators normally use {@link shouldDrop} or the context's helpers.
   */
  take<K extends FaultKind>(kind: K, target: FaultTarget): FaultOf<K> | undefined;
  /** Hook for emulators: should this stream's final message be suppressed? */
  shouldDrop(kind: "exit-frame", route: string | null, method?: string): FaultOf<"exit-frame"> | undefined;
  /** Faults still armed. */
  active(): FaultHandle[];
  /** Every application so far, oldest first. */
  applied(): AppliedFault[];
  /** Disarms everything and forgets the applied log. */
  clear(): void;
}

export interface FaultInjectorOptions {
  /** Randomness for `probability` (default Math.random); inject a seeded one for repeatable runs. */
  random?: () => number;
  now?: () => number;
}

interface ArmedFault {
  id: number;
  spec: FaultSpec;
  seen: number;
  hits: number;
}

export function createFaultInjector(options: FaultInjectorOptions = {}): FaultInjector {
  const random = options.random ?? Math.random;
  const now = options.now ?? Date.now;
  let armed: ArmedFault[] = [];
  let log: AppliedFault[] = [];
  let nextId = 1;

  const remainingOf = (fault: ArmedFault) => (fault.spec.times === undefined ? Infinity : fault.spec.times - fault.hits);

  const handleOf = (fault: ArmedFault): FaultHandle => ({
    id: fault.id,
    spec: fault.spec,
    get hits() {
      return fault.hits;
    },
    get remaining() {
      return remainingOf(fault);
    },
    remove() {
      armed = armed.filter((other) => other !== fault);
    },
  });

  const take = <K extends FaultKind>(kind: K, target: FaultTarget): FaultOf<K> | undefined => {
    const method = target.method?.toUpperCase();
    for (const fault of armed) {
      const { spec } = fault;
      if (spec.kind !== kind) continue;
      if (spec.route === "*" ? target.internal === true : spec.route !== target.route) continue;
      if (spec.method !== undefined && spec.method.toUpperCase() !== method) continue;
      fault.seen++;
      if (fault.seen <= (spec.skip ?? 0)) continue;
      if (spec.probability !== undefined && random() >= spec.probability) continue;
      fault.hits++;
      if (remainingOf(fault) <= 0) armed = armed.filter((other) => other !== fault);
      log.push({ faultId: fault.id, kind, route: target.route, method, at: now() });
      return spec as unknown as FaultOf<K>;
    }
    return undefined;
  };

  return {
    inject(spec) {
      validateFault(spec);
      const fault: ArmedFault = { id: nextId++, spec: { ...spec }, seen: 0, hits: 0 };
      armed.push(fault);
      return handleOf(fault);
    },
    take,
    shouldDrop: (kind, route, method) => take(kind, { route, method }),
    active: () => armed.map(handleOf),
    applied: () => [...log],
    clear() {
      armed = [];
      log = [];
    },
  };
}

function validateFault(spec: FaultSpec): void {
  const fail = (field: string, rule: string): never => {
    throw new TypeError(`fault ${field}: ${rule} (got ${JSON.stringify((spec as unknown as Record<string, unknown>)[field])})`);
  };
  if (!FAULT_KINDS.includes(spec.kind)) fail("kind", `must be one of ${FAULT_KINDS.join(", ")}`);
  if (typeof spec.route !== "string" || spec.route === "") fail("route", "must be a registered route pattern or '*'");
  const count = (field: "times" | "skip") => {
    const value = spec[field];
    if (value !== undefined && (!Number.isInteger(value) || value < (field === "times" ? 1 : 0))) {
      fail(field, field === "times" ? "must be an integer >= 1" : "must be an integer >= 0");
    }
  };
  count("times");
  count("skip");
  if (spec.probability !== undefined && !(spec.probability >= 0 && spec.probability <= 1)) fail("probability", "must be within 0..1");
  switch (spec.kind) {
    case "latency":
      if (!(Number.isFinite(spec.ms) && spec.ms >= 0)) fail("ms", "must be a finite number >= 0");
      break;
    case "status":
      if (spec.status !== undefined && !(Number.isInteger(spec.status) && spec.status >= 500 && spec.status <= 599)) {
        fail("status", "must be an integer within 500..599");
      }
      if (spec.grpcCode !== undefined && !(Number.isInteger(spec.grpcCode) && spec.grpcCode >= 1 && spec.grpcCode <= 16)) {
        fail("grpcCode", "must be a non-OK gRPC status code, 1..16");
      }
      break;
    case "rate-limit":
      if (spec.retryAfterSeconds !== undefined && !(Number.isInteger(spec.retryAfterSeconds) && spec.retryAfterSeconds >= 0)) {
        fail("retryAfterSeconds", "must be an integer >= 0");
      }
      break;
    case "reset":
      if (spec.afterBytes !== undefined && !(Number.isInteger(spec.afterBytes) && spec.afterBytes >= 0)) fail("afterBytes", "must be an integer >= 0");
      break;
    case "drop-stream":
      if (spec.afterMessages !== undefined && !(Number.isInteger(spec.afterMessages) && spec.afterMessages >= 0)) {
        fail("afterMessages", "must be an integer >= 0");
      }
      break;
    case "exit-frame":
      if (spec.then !== undefined && spec.then !== "end" && spec.then !== "hang") fail("then", "must be 'end' or 'hang'");
      break;
  }
}
