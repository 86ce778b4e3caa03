import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

/** The proto shipped with the package (`proto/boxd.proto`, beside `dist/`). */
export const BOXD_PROTO_PATH = fileURLToPath(new URL("../proto/boxd.proto", import.meta.url));
export const BOXD_SERVICE = "boxd.api.v1.BoxdApi";

let service: grpc.ServiceClientConstructor | undefined;

/** The generated client constructor for `boxd.api.v1.BoxdApi` (loaded once per process). */
export function boxdServiceClient(): grpc.ServiceClientConstructor {
  if (!service) {
    // longs as Number (sizes and times fit), enums as String; every field present with its default.
    const definition = protoLoader.loadSync(BOXD_PROTO_PATH, { keepCase: true, longs: Number, enums: String, defaults: true });
    const root = grpc.loadPackageDefinition(definition) as unknown as { boxd: { api: { v1: { BoxdApi: grpc.ServiceClientConstructor } } } };
    service = root.boxd.api.v1.BoxdApi;
  }
  return service;
}

/** Wire shapes of the messages the client reads (proto-loader: keepCase, defaults). */
export interface VmWire {
  vm_id: string;
  name: string;
  image_ref: string;
  status: string;
  restart_policy: string;
  vcpu: number;
  memory_bytes: number;
  labels: Record<string, string>;
  org: string;
  isolated: boolean;
  created_at_unix: number;
  destroy_at_unix: number;
}

export interface CreatedWire {
  vm_id: string;
  name: string;
  status: string;
  url: string;
  boot_time_ms: number;
}

export interface ExecChunkWire {
  data: Buffer;
  stdin: boolean;
  exit_code: number;
  is_stderr: boolean;
}
