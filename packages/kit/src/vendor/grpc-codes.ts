/**
 * The gRPC / Connect status codes, shared by every client and server in this repo (the kit's
 * `apiErrorFromGrpcStatus`, which the envd family and modal translate with, and the emulator kit's
 * gRPC and Connect servers): the number on the wire, the protocol's snake_case name, and the HTTP
 * status Connect pairs with it (connectrpc.com/docs/protocol#error-codes).
 */
export const GRPC_CODE_NAMES = [
  "ok",
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
] as const;

export type GrpcCodeName = (typeof GRPC_CODE_NAMES)[number];
/** Every code but `ok`: what an error carries. */
export type ConnectCode = Exclude<GrpcCodeName, "ok">;

/** The HTTP status a unary Connect error is answered with. */
export const CONNECT_CODE_STATUS: Readonly<Record<ConnectCode, number>> = Object.freeze({
  canceled: 499,
  unknown: 500,
  invalid_argument: 400,
  deadline_exceeded: 504,
  not_found: 404,
  already_exists: 409,
  permission_denied: 403,
  resource_exhausted: 429,
  failed_precondition: 400,
  aborted: 409,
  out_of_range: 400,
  unimplemented: 501,
  internal: 500,
  unavailable: 503,
  data_loss: 500,
  unauthenticated: 401,
});

/** The name of a numeric code (`8` → `resource_exhausted`); undefined for a number outside the table. */
export function grpcCodeName(code: number): GrpcCodeName | undefined {
  return Number.isInteger(code) ? GRPC_CODE_NAMES[code] : undefined;
}

/** The Connect name of a status code, its number or its name; `unknown` for one outside the table, and for `ok`, which is no error. */
export function connectCodeOf(code: number | string): ConnectCode {
  const name = typeof code === "number" ? grpcCodeName(code) : (GRPC_CODE_NAMES as readonly string[]).includes(code) ? (code as GrpcCodeName) : undefined;
  return name === undefined || name === "ok" ? "unknown" : name;
}
