import grpc from "@grpc/grpc-js";

export const GrpcStatus = grpc.status;

const NAMES = new Map<number, string>(
  Object.entries(grpc.status)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [v as number, k]),
);

/** `14` → `UNAVAILABLE`. */
export function grpcCodeName(code: number): string {
  return NAMES.get(code) ?? `CODE_${code}`;
}

/** Thrown by gRPC handlers (and auth helpers) to end a call with a status. */
export class GrpcError extends Error {
  readonly code: grpc.status;
  readonly metadata: grpc.Metadata;

  constructor(code: grpc.status, details: string, metadata?: Record<string, string> | grpc.Metadata) {
    super(details);
    this.name = "GrpcError";
    if (!NAMES.has(code) || code === grpc.status.OK) throw new TypeError(`GrpcError code: must be a non-OK gRPC status (got ${code})`);
    this.code = code;
    if (metadata instanceof grpc.Metadata) this.metadata = metadata;
    else {
      this.metadata = new grpc.Metadata();
      for (const [key, value] of Object.entries(metadata ?? {})) this.metadata.set(key, value);
    }
  }

  toStatus(): grpc.StatusObject {
    return { code: this.code, details: this.message, metadata: this.metadata };
  }
}
