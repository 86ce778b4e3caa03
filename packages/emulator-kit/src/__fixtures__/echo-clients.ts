// Real clients for the echo example, shared by the kit's tests.
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import { encodeEnvelope, FLAG_END_STREAM } from "../connect/envelope.js";
import { ECHO_PROTO_PATH } from "../example/echo.js";

export type EchoGrpcClient = grpc.Client & Record<string, (...args: any[]) => any>;

export function echoGrpcClient(target: string, credentials = grpc.credentials.createInsecure(), options: grpc.ChannelOptions = {}): EchoGrpcClient {
  const definition = protoLoader.loadSync(ECHO_PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const loaded = grpc.loadPackageDefinition(definition) as any;
  return new loaded.echo.v1.Echo(target, credentials, options) as EchoGrpcClient;
}

export function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

export function unary<Res>(client: EchoGrpcClient, method: string, request: object, metadata: grpc.Metadata, options: grpc.CallOptions = {}): Promise<Res> {
  return new Promise((resolve, reject) => client[method]!(request, metadata, options, (error: Error | null, response: Res) => (error ? reject(error) : resolve(response))));
}

/** Collects a server stream: messages, then the status or error. */
export function collectStream(call: grpc.ClientReadableStream<unknown>): Promise<{ messages: unknown[]; error?: grpc.ServiceError; status?: grpc.StatusObject }> {
  return new Promise((resolve) => {
    const messages: unknown[] = [];
    let error: grpc.ServiceError | undefined;
    call.on("data", (message) => messages.push(message));
    call.on("error", (e: grpc.ServiceError) => (error = e));
    call.on("status", (status: grpc.StatusObject) => resolve({ messages, error, status }));
    call.on("close", () => setTimeout(() => resolve({ messages, error }), 50));
  });
}

/** One Connect streaming request body: the message envelope. */
export const connectRequest = (message: object) => encodeEnvelope(0, JSON.stringify(message));

/** Splits a Connect streaming response into its messages and the end-stream JSON. */
export function parseConnectStream(bytes: Buffer): { messages: unknown[]; end: any; endSeen: boolean } {
  const messages: unknown[] = [];
  let end: any;
  let endSeen = false;
  let offset = 0;
  while (offset + 5 <= bytes.length) {
    const flags = bytes[offset]!;
    const length = bytes.readUInt32BE(offset + 1);
    const data = bytes.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & FLAG_END_STREAM) {
      end = JSON.parse(data.toString());
      endSeen = true;
    } else messages.push(JSON.parse(data.toString()));
  }
  return { messages, end, endSeen };
}
