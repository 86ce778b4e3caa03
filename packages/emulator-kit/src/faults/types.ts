/** Every fault the kit can inject. */
export type FaultKind = "latency" | "status" | "rate-limit" | "reset" | "drop-stream" | "exit-frame";

export const FAULT_KINDS: readonly FaultKind[] = ["latency", "status", "rate-limit", "reset", "drop-stream", "exit-frame"];

/** Added delay before the handler runs. */
export interface LatencyFault {
  kind: "latency";
  ms: number;
}

/** An error answer instead of the handler's (HTTP 5xx through the vendor's envelope; a gRPC status). */
export interface StatusFault {
  kind: "status";
  /** HTTP status, 500–599 (default 503). */
  status?: number;
  /** gRPC status code for gRPC calls (default 14, UNAVAILABLE). */
  grpcCode?: number;
  message?: string;
}

/** HTTP 429 with `Retry-After` (gRPC: RESOURCE_EXHAUSTED with `retry-after` and `grpc-retry-pushback-ms`). */
export interface RateLimitFault {
  kind: "rate-limit";
  /** Seconds, sent as an integer `Retry-After` (default 1). */
  retryAfterSeconds?: number;
  message?: string;
}

/** The handler runs; its status line and headers go out, then the connection is destroyed mid-body. */
export interface ResetFault {
  kind: "reset";
  /** Body bytes let through before the cut (default 0). */
  afterBytes?: number;
}

/** A stream (SSE, Connect/gRPC server stream, WebSocket) cut without its proper end. */
export interface DropStreamFault {
  kind: "drop-stream";
  /** Messages the server sends before the cut (default 1). */
  afterMessages?: number;
}

/**
 * The emulator's last stream message (a process exit event, a Kubernetes status frame) is
 * suppressed. Emulators ask {@link FaultInjector.shouldDrop} before sending it.
 */
export interface ExitFrameFault {
  kind: "exit-frame";
  /** After suppressing it: end the stream normally (`end`, default) or leave it open (`hang`). */
  then?: "end" | "hang";
}

export type FaultEffect = LatencyFault | StatusFault | RateLimitFault | ResetFault | DropStreamFault | ExitFrameFault;

/** Which calls a fault applies to, and how often. */
export interface FaultScope {
  /** A route pattern exactly as registered (`/sandboxes/:id`, `/pkg.Svc/Method`), or `*` for all. */
  route: string;
  /** Only this method (HTTP method, upper case); any when absent. */
  method?: string;
  /** Apply to the next N matching calls, then retire (default: until removed). */
  times?: number;
  /** Let the first N matching calls through untouched before applying. */
  skip?: number;
  /** Apply to a matching call with this probability, 0–1 (default 1). */
  probability?: number;
}

export type FaultSpec = FaultEffect & FaultScope;

export type FaultOf<K extends FaultKind> = Extract<FaultEffect, { kind: K }>;
