import { GrpcError, GrpcStatus, type GrpcCall, type GrpcHandler, type JwtIssuer } from "@paperclip-sandbox/emulator-kit";
import { serveExec, type ExecChunk } from "./exec.js";
import { serveUpload, type FileChunk } from "./files.js";
import type { Machine, MachineManager, SnapshotRecord } from "./machines.js";
import type { BoxdAccount } from "./options.js";

export const SERVICE = "boxd.api.v1.BoxdApi";

/** What the exchanged JWT carries. */
export interface TokenClaims {
  sub: string;
  org: string;
}

interface VmConfigWire {
  vcpu: number;
  memory_bytes: number;
  disk_bytes: number;
}

const seconds = (ms: number | null) => (ms === null ? 0 : Math.floor(ms / 1000));

function machineView(m: Machine) {
  return {
    vm_id: m.id,
    name: m.name,
    image_ref: m.imageRef,
    status: m.status,
    restart_policy: m.restartPolicy,
    vcpu: m.vcpu,
    memory_bytes: m.memoryBytes,
    labels: m.labels,
    org: m.org,
    isolated: m.isolated,
    created_at_unix: seconds(m.createdAt),
    destroy_at_unix: seconds(m.destroyAt),
  };
}

function created(m: Machine, bootMs: number) {
  return { vm_id: m.id, name: m.name, public_ip: "", url: `https://${m.name}.boxd.sh`, image: m.imageRef, status: m.status, boot_time_ms: bootMs };
}

function snapshotView(s: SnapshotRecord) {
  return { snapshot_id: s.id, name: s.name, version: s.version, status: s.status, size_bytes: s.sizeBytes, vcpu: s.vcpu, memory_bytes: s.memoryBytes };
}

const u32 = (value: unknown, field: string) => {
  const n = Number(value ?? 0);
  if (!Number.isInteger(n) || n < 0) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, `${field}: must be a non-negative integer`);
  return n;
};

/** The `boxd.api.v1.BoxdApi` handlers; every call is authorized by the bearer JWT first. */
export function boxdHandlers(deps: { machines: MachineManager; tokens: JwtIssuer<TokenClaims>; accounts: readonly BoxdAccount[] }): Record<string, GrpcHandler> {
  const { machines } = deps;
  const accountOf = (call: GrpcCall): BoxdAccount => {
    const raw = call.metadata.get("authorization")[0];
    const claims = deps.tokens.verify(typeof raw === "string" ? raw : raw?.toString("utf8"));
    const account = claims ? deps.accounts.find((a) => a.userId === claims.sub && a.org === claims.org) : undefined;
    if (!account) throw new GrpcError(GrpcStatus.UNAUTHENTICATED, "missing, malformed or expired token (exchange the API key at /api/v1/auth/token)");
    return account;
  };
  const vm = (call: GrpcCall, request: { vm_id: string }) => machines.find(accountOf(call), request.vm_id);

  return {
    Whoami: (_request: unknown, call: GrpcCall) => {
      const account = accountOf(call);
      return { user_id: account.userId, display_name: account.displayName ?? account.userId };
    },
    async CreateVm(request: { name: string; image_ref: string; restart_policy: string; config: VmConfigWire | null; org: string; isolated: boolean; labels: Record<string, string> }, call: GrpcCall) {
      const t0 = Date.now();
      const m = await machines.create({
        account: accountOf(call),
        name: request.name,
        imageRef: request.image_ref,
        restartPolicy: request.restart_policy,
        config: request.config,
        org: request.org,
        isolated: request.isolated,
        labels: request.labels ?? {},
      });
      return created(m, Date.now() - t0);
    },
    async CreateVmFromSnapshot(request: { snapshot: string; name: string; config: VmConfigWire | null; org: string; isolated: boolean; labels: Record<string, string> }, call: GrpcCall) {
      if (!request.snapshot) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "snapshot: required");
      const t0 = Date.now();
      const m = await machines.create({
        account: accountOf(call),
        name: request.name,
        imageRef: "",
        restartPolicy: "",
        config: request.config,
        org: request.org,
        isolated: request.isolated,
        labels: request.labels ?? {},
        snapshot: request.snapshot,
      });
      return created(m, Date.now() - t0);
    },
    GetVm: (request: { vm_id: string }, call: GrpcCall) => machineView(vm(call, request)),
    ListVms: (request: { org: string; labels: Record<string, string> }, call: GrpcCall) => ({ vms: machines.list(accountOf(call), request.org, request.labels ?? {}).map(machineView) }),
    DestroyVm(request: { vm_id: string }, call: GrpcCall) {
      const m = vm(call, request);
      if (m.status === "destroying") throw new GrpcError(GrpcStatus.NOT_FOUND, `machine ${request.vm_id} not found`);
      machines.destroy(m);
      return {};
    },
    async StartVm(request: { vm_id: string }, call: GrpcCall) {
      await machines.start(vm(call, request));
      return {};
    },
    async StopVm(request: { vm_id: string }, call: GrpcCall) {
      await machines.stop(vm(call, request));
      return {};
    },
    async SuspendVm(request: { vm_id: string }, call: GrpcCall) {
      return { suspend_us: await machines.suspend(vm(call, request), "suspended") };
    },
    async HibernateVm(request: { vm_id: string }, call: GrpcCall) {
      await machines.suspend(vm(call, request), "hibernated");
      return {};
    },
    async ResumeVm(request: { vm_id: string }, call: GrpcCall) {
      return { resume_us: await machines.resume(vm(call, request)) };
    },
    async WakeVm(request: { vm_id: string }, call: GrpcCall) {
      await machines.resume(vm(call, request));
      return {};
    },
    SetAutoSuspendTimeout(request: { vm_id: string; timeout_secs: number }, call: GrpcCall) {
      machines.setIdleTimeout(vm(call, request), "suspend", u32(request.timeout_secs, "timeout_secs"));
      return {};
    },
    SetAutoHibernateTimeout(request: { vm_id: string; timeout_secs: number }, call: GrpcCall) {
      machines.setIdleTimeout(vm(call, request), "hibernate", u32(request.timeout_secs, "timeout_secs"));
      return {};
    },
    SetAutoDestroyTimeout(request: { vm_id: string; timeout_secs: number }, call: GrpcCall) {
      machines.setAutoDestroy(vm(call, request), u32(request.timeout_secs, "timeout_secs"));
      return {};
    },
    async ResizeVm(request: { vm_id: string; vcpu: number; memory_bytes: number }, call: GrpcCall) {
      const m = vm(call, request);
      const { rebooted } = await machines.resize(m, u32(request.vcpu, "vcpu"), Number(request.memory_bytes ?? 0));
      return { vcpu: m.vcpu, memory_bytes: m.memoryBytes, rebooted };
    },
    async CreateSnapshot(request: { vm: string; name: string }, call: GrpcCall) {
      const account = accountOf(call);
      const s = await machines.createSnapshot(account, machines.find(account, request.vm), request.name);
      return { snapshot_id: s.id, name: s.name, version: s.version, status: s.status };
    },
    GetSnapshot: (request: { name: string; org: string }, call: GrpcCall) => ({ snapshot: snapshotView(machines.getSnapshot(accountOf(call), request.name, request.org)) }),
    ListSnapshots: (request: { org: string }, call: GrpcCall) => ({ snapshots: machines.listSnapshots(accountOf(call), request.org).map(snapshotView) }),
    async DeleteSnapshot(request: { name: string; org: string }, call: GrpcCall) {
      await machines.deleteSnapshot(accountOf(call), request.name, request.org);
      return {};
    },
    Exec: (input: AsyncIterable<ExecChunk>, call: GrpcCall) => serveExec(machines, accountOf(call), input, call),
    UploadFileStream: (input: AsyncIterable<FileChunk>, call: GrpcCall) => serveUpload(machines, accountOf(call), input, "upload"),
    WriteFile: (input: AsyncIterable<FileChunk>, call: GrpcCall) => serveUpload(machines, accountOf(call), input, "write"),
  };
}
