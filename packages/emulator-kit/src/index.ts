// Server plumbing for in-repo vendor API emulators: loopback servers (HTTP/1.1, h2c, TLS,
// WebSocket, gRPC), vendor-shaped errors and auth, Connect, multipart, SSE, pagination, a request
// recorder and fault injection, and a registry that starts emulators by name.
export { createRequestRecorder } from "./recorder/recorder.js";
export type { RecordFilter, RecordHandle, RecorderOptions, RequestProtocol, RequestRecord, RequestRecorder, UnservedCall } from "./recorder/recorder.js";
export { REDACTED, SECRET_HEADER_NAMES, redactHeaders } from "./recorder/redact-headers.js";

export { createFaultInjector } from "./faults/injector.js";
export type { AppliedFault, FaultHandle, FaultInjector, FaultInjectorOptions, FaultTarget } from "./faults/injector.js";
export { FAULT_KINDS } from "./faults/types.js";
export type * from "./faults/types.js";

export { startHttpServer } from "./http/server.js";
export type { HttpServer, HttpServerOptions } from "./http/server.js";
export { listen } from "./http/listener.js";
export type { ConnectionSinks, Listener, ListenerOptions } from "./http/listener.js";
export { generateSelfSignedCertificate } from "./http/tls-cert.js";
export type { SelfSignedCertificate, SelfSignedOptions } from "./http/tls-cert.js";
export { createRouter } from "./http/router.js";
export type { HttpHandler, HttpRoute, RawAnswer, RouteOptions, Router, RouterOptions } from "./http/router.js";
export type { HttpContext } from "./http/context.js";
export type { HttpRequest, HttpResponse } from "./http/types.js";
export { compilePattern } from "./http/pattern.js";
export type { PathPattern } from "./http/pattern.js";
export { HttpError, defaultErrorEnvelope, isHttpError } from "./http/errors.js";
export type { ErrorEnvelope, ErrorInfo, HttpErrorOptions } from "./http/errors.js";
export { DEFAULT_BODY_LIMIT, readBytes, readJson } from "./http/body.js";
export { queryBool, queryInt, queryList } from "./http/query.js";
export { openSse } from "./http/sse.js";
export type { SseEvent, SseOptions, SseWriter } from "./http/sse.js";
export type { WebSocketContext, WebSocketRoute } from "./http/websocket.js";

export { checkCredential } from "./auth/credential.js";
export type { CredentialCheck, CredentialRule } from "./auth/credential.js";
export { requireApiKey, requireBearer } from "./auth/http-auth.js";
export type { ApiKeyRule, AuthAnswers, BearerRule } from "./auth/http-auth.js";
export { createJwtIssuer } from "./auth/jwt.js";
export type { IssuedJwt, JwtIssuer, JwtTimes } from "./auth/jwt.js";

export { buildMultipart } from "./multipart/build.js";
export type { BuildOptions, BuiltMultipart, PartInput } from "./multipart/build.js";
export { MultipartError, parseMultipart, readMultipart } from "./multipart/parse.js";
export type { BufferedPart, MultipartLimits, MultipartPart } from "./multipart/parse.js";
export { multipartBoundary, parseHeaderParams } from "./multipart/headers.js";

export { CONNECT_CODES, CONNECT_CODE_STATUS, ConnectError, connectCodeForStatus } from "./connect/codes.js";
export type { ConnectCode, ConnectErrorOptions } from "./connect/codes.js";
export { connectClientStream, connectErrorEnvelope, connectServerStream, connectUnary } from "./connect/handlers.js";
export type { ConnectCall, ConnectClientStreamHandler, ConnectRouteOptions, ConnectServerStream, ConnectServerStreamHandler, ConnectUnaryHandler } from "./connect/handlers.js";
export { FLAG_COMPRESSED, FLAG_END_STREAM, encodeEnvelope, readEnvelopes } from "./connect/envelope.js";
export type { Envelope } from "./connect/envelope.js";
export { parseConnectTimeout } from "./connect/deadline.js";

export { startGrpcServer } from "./grpc/server.js";
export type { GrpcCall, GrpcCallKind, GrpcHandler, GrpcServer, GrpcServerOptions } from "./grpc/server.js";
export { GrpcError, GrpcStatus, grpcCodeName } from "./grpc/status.js";
export { requireGrpcCredential } from "./grpc/auth.js";
export type { GrpcAuthRule } from "./grpc/auth.js";

export { decodeCursor, encodeCursor, paginate } from "./pagination.js";
export type { Page, PageOptions, PageRequest } from "./pagination.js";

export { startSshServer } from "./ssh/server.js";
export type { SshHost, SshServer, SshServerOptions, SshSessionExit, SshSessionHandler, SshSessionPty, SshSessionRequest } from "./ssh/server.js";
export { GATE_FRAME } from "./ssh/gate.js";

export { createEmulatorRegistry, runEmulator } from "./emulator.js";
export type { EmulatorDefinition, EmulatorKitContext, EmulatorParts, EmulatorRegistry, RunningEmulator, StartEmulatorOptions } from "./emulator.js";

export { checkTimeScale, createManualClock, createVendorClock } from "./clock/clock.js";
export type { ManualClock, VendorClock, VendorClockOptions } from "./clock/clock.js";
export { createSerial } from "./serial.js";
export type { Serial } from "./serial.js";
export { startEmulatorBackend } from "./backend.js";
export { coverageReport, coverageTable, withCoverageTable } from "./coverage.js";
export type { CoverageEntry, CoverageReport, CoverageSpec, CoverageStatus, SdkOperation } from "./coverage.js";
export type { EmulatorBackend, EmulatorBackendOptions } from "./backend.js";

export { ECHO_PROTO_PATH, echoEmulator } from "./example/echo.js";
export type { EchoOptions } from "./example/echo.js";
