// The boxd emulator over raw gRPC (grpc-js + the proto), as any boxd client sees it: the token
// exchange, boxd's codes, the machine state machine, timers on the compressed clock, files, snapshots.
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { coverageReport, coverageTable, createManualClock, runEmulator, withCoverageTable, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { BOXD_COVERAGE, BOXD_PROTO_PATH, boxdOperations, emulator, newApiKey, type BoxdEmulatorControl } from "./index.js";

type Client = grpc.Client & Record<string, (...args: unknown[]) => unknown>;
const definition = protoLoader.loadSync(BOXD_PROTO_PATH, { keepCase: true, longs: Number, enums: String, defaults: true });
const Service = (grpc.loadPackageDefinition(definition) as unknown as { boxd: { api: { v1: { BoxdApi: grpc.ServiceClientConstructor } } } }).boxd.api.v1.BoxdApi;

const other = { apiKey: newApiKey(), userId: "someone", org: "other-org" };
/** Where the emulator keeps its jails and snapshot copies (read by the snapshot-copy test). */
const scratchParent = mkdtempSync(join(tmpdir(), "bxp-"));
// Jails run as other uids: they must be able to pass through it.
chmodSync(scratchParent, 0o711);
let emu: RunningEmulator;
let control: BoxdEmulatorControl;
let client: Client;
let token: string;

async function exchange(apiKey: string, at = emu): Promise<Response> {
  return fetch(at.endpoints.exchange!, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ api_key: apiKey }) });
}
const auth = (bearer = token) => {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${bearer}`);
  return md;
};
function call<T = Record<string, unknown>>(method: string, request: object, bearer = token): Promise<T> {
  return new Promise((resolve, reject) => client[method]!.call(client, request, auth(bearer), (error: Error | null, response: T) => (error ? reject(error) : resolve(response))));
}
/** One Exec: the command, optional stdin, then the output streams and the exit code. */
function exec(vmId: string, command: string, stdin?: Buffer): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve, reject) => {
    const stream = (client.Exec as unknown as (md: grpc.Metadata) => grpc.ClientDuplexStream<object, { data: Buffer; is_stderr: boolean; exit_code: number }>)(auth());
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let code = -1;
    stream.on("data", (chunk) => {
      if (chunk.data.length === 0) code = chunk.exit_code;
      else (chunk.is_stderr ? err : out).push(chunk.data);
    });
    stream.on("error", reject);
    stream.on("end", () => resolve({ stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString(), code }));
    stream.write({ vm_id: vmId, command });
    if (stdin) stream.write({ stdin: true, data: stdin });
    stream.end();
  });
}
function upload(method: "WriteFile" | "UploadFileStream", head: object, data: Buffer): Promise<{ bytes_written: number }> {
  return new Promise((resolve, reject) => {
    const stream = (client[method] as unknown as (md: grpc.Metadata, cb: (e: Error | null, r: { bytes_written: number }) => void) => grpc.ClientWritableStream<object>)(auth(), (e, r) =>
      e ? reject(e) : resolve(r),
    );
    stream.write({ ...head, total_size: data.length, data });
    stream.end();
  });
}
const code = (name: keyof typeof grpc.status) => expect.objectContaining({ code: grpc.status[name] });
const create = (request: object = {}) => call<{ vm_id: string; name: string; status: string }>("CreateVm", { config: { vcpu: 1 }, ...request });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  emu = await runEmulator(emulator, {
    options: { maxMachinesPerOrg: 4, scratchParent, accounts: [{ apiKey: newApiKey(), userId: "octo", org: "personal", displayName: "Octo" }, other], expose: (c) => (control = c) },
  });
  client = new Service(emu.url.replace("http://", ""), grpc.credentials.createInsecure()) as Client;
  token = ((await (await exchange(emu.credentials.apiKey!)).json()) as { token: string }).token;
});
afterAll(async () => {
  client?.close();
  await emu?.close();
  rmSync(scratchParent, { recursive: true, force: true });
});

describe("boxd emulator: token exchange and auth", () => {
  it("exchanges a key for a JWT with expires_at and user_id; a bad key is 401", async () => {
    const ok = await exchange(emu.credentials.apiKey!);
    const body = (await ok.json()) as { token: string; expires_at: number; user_id: string };
    expect(body).toMatchObject({ token: expect.stringMatching(/^ey[\w-]+\.[\w-]+\.[\w-]+$/), user_id: "octo" });
    expect(body.expires_at * 1000).toBeGreaterThan(Date.now() + 3500_000);
    const bad = await exchange(newApiKey());
    expect(bad.status).toBe(401);
    expect(await bad.json()).toEqual({ error: "invalid API key" });
    expect((await exchange("")).status).toBe(401);
  });

  it("every RPC needs the bearer JWT (UNAUTHENTICATED otherwise), and the recorder keeps it redacted", async () => {
    await expect(call("Whoami", {}, "not-a-jwt")).rejects.toEqual(code("UNAUTHENTICATED"));
    expect(await call("Whoami", {})).toEqual({ user_id: "octo", display_name: "Octo" });
    const record = emu.requests.list({ route: "/boxd.api.v1.BoxdApi/Whoami" }).at(-1)!;
    expect(record.headers.authorization).toBe("[redacted]");
    expect(JSON.stringify(emu.requests.list())).not.toContain(token);
  });

  it("an expired token is refused", async () => {
    const e2 = await runEmulator(emulator, { options: { tokenTtlSeconds: 1 } });
    try {
      const issued = (await (await exchange(e2.credentials.apiKey!, e2)).json()) as { token: string; expires_at: number };
      const short = issued.token;
      const c2 = new Service(e2.url.replace("http://", ""), grpc.credentials.createInsecure()) as Client;
      const whoami = () => new Promise((resolve, reject) => c2.Whoami!.call(c2, {}, auth(short), (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))));
      await expect(whoami()).resolves.toMatchObject({ user_id: "paperclip-e2e" });
      await sleep(issued.expires_at * 1000 - Date.now() + 50);
      await expect(whoami()).rejects.toEqual(code("UNAUTHENTICATED"));
      c2.close();
    } finally {
      await e2.close();
    }
  });
});

describe("boxd emulator: machines", () => {
  it("creates sized, labelled, isolated machines; refuses bad sizes, names and duplicate names", async () => {
    const vm = await create({ name: "sized-one", config: { vcpu: 4 }, labels: { team: "a", "paperclip-run": "r1" }, isolated: true });
    expect(vm).toMatchObject({ name: "sized-one", status: "running" });
    expect(await call("GetVm", { vm_id: "sized-one" })).toMatchObject({
      vm_id: vm.vm_id,
      vcpu: 4,
      memory_bytes: 16 * 1024 ** 3,
      labels: { team: "a", "paperclip-run": "r1" },
      isolated: true,
      org: "personal",
      status: "running",
    });
    await expect(create({ name: "sized-one" })).rejects.toEqual(code("ALREADY_EXISTS"));
    await expect(create({ name: "three", config: { vcpu: 3 } })).rejects.toEqual(
      expect.objectContaining({ code: grpc.status.INVALID_ARGUMENT, details: "config.vcpu: 3 is not a size class (1, 2, 4 or 8)" }),
    );
    await expect(create({ name: "mem", config: { vcpu: 1, memory_bytes: 1 } })).rejects.toEqual(code("INVALID_ARGUMENT"));
    await expect(create({ name: "disk", config: { vcpu: 1, disk_bytes: 5 } })).rejects.toEqual(code("INVALID_ARGUMENT"));
    await expect(create({ name: "Not_A_Label" })).rejects.toEqual(code("INVALID_ARGUMENT"));
    await expect(create({ name: "elsewhere", org: "other-org" })).rejects.toEqual(code("PERMISSION_DENIED"));
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("lists the org's machines by label; another org's machines are invisible (NOT_FOUND)", async () => {
    const a = await create({ name: "list-a", labels: { "paperclip-provider": "boxd", lane: "1" } });
    const b = await create({ name: "list-b", labels: { "paperclip-provider": "boxd", lane: "2" } });
    const listed = await call<{ vms: Array<{ name: string }> }>("ListVms", { labels: { "paperclip-provider": "boxd", lane: "2" } });
    expect(listed.vms.map((v) => v.name)).toEqual(["list-b"]);
    const otherToken = ((await (await exchange(other.apiKey)).json()) as { token: string }).token;
    await expect(call("GetVm", { vm_id: a.vm_id }, otherToken)).rejects.toEqual(code("NOT_FOUND"));
    expect((await call<{ vms: unknown[] }>("ListVms", {}, otherToken)).vms).toEqual([]);
    for (const vm of [a, b]) await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("refuses a machine past the org's quota (RESOURCE_EXHAUSTED)", async () => {
    const made = [];
    for (let i = 0; i < 4; i++) made.push(await create({ name: `quota-${i}` }));
    await expect(create({ name: "quota-4" })).rejects.toEqual(code("RESOURCE_EXHAUSTED"));
    for (const vm of made) await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("suspend freezes processes and memory; resume continues them; hibernate is its own state", async () => {
    const vm = await create({ name: "freezer" });
    await exec(vm.vm_id, `nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/c.tmp; mv /tmp/c.tmp /tmp/c; sleep 0.05; done' >/dev/null 2>&1 & echo $! > /tmp/pid`);
    await sleep(300);
    expect(Number((await call<{ suspend_us: number }>("SuspendVm", { vm_id: vm.vm_id })).suspend_us)).toBeGreaterThan(0);
    expect(await call("GetVm", { vm_id: vm.vm_id })).toMatchObject({ status: "suspended" });
    // Read from the host (the jail is frozen): the counter does not move while suspended.
    const record = control.machines().find((m) => m.id === vm.vm_id)!;
    expect(record.status).toBe("suspended");
    await call("HibernateVm", { vm_id: vm.vm_id });
    expect(await call("GetVm", { vm_id: vm.vm_id })).toMatchObject({ status: "hibernated" });
    await expect(call("SuspendVm", { vm_id: vm.vm_id })).rejects.toEqual(code("FAILED_PRECONDITION"));
    await call("ResumeVm", { vm_id: vm.vm_id });
    const first = Number((await exec(vm.vm_id, "cat /tmp/c")).stdout);
    await sleep(300);
    const after = await exec(vm.vm_id, 'kill -0 "$(cat /tmp/pid)" && cat /tmp/c');
    expect(after.code).toBe(0);
    expect(Number(after.stdout)).toBeGreaterThan(first);
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("stop is cold (processes end, disk kept); a stopped machine refuses commands until StartVm", async () => {
    const vm = await create({ name: "cold" });
    await exec(vm.vm_id, "echo kept > $HOME/note; nohup sleep 300 >/dev/null 2>&1 & echo $! > $HOME/pid");
    await call("StopVm", { vm_id: vm.vm_id });
    expect(await call("GetVm", { vm_id: vm.vm_id })).toMatchObject({ status: "stopped" });
    await expect(exec(vm.vm_id, "true")).rejects.toEqual(expect.objectContaining({ code: grpc.status.FAILED_PRECONDITION, details: "machine cold is stopped" }));
    await expect(call("ResumeVm", { vm_id: vm.vm_id })).rejects.toEqual(code("FAILED_PRECONDITION"));
    await expect(call("StopVm", { vm_id: vm.vm_id })).rejects.toEqual(code("FAILED_PRECONDITION"));
    await call("StartVm", { vm_id: vm.vm_id });
    await expect(call("StartVm", { vm_id: vm.vm_id })).rejects.toEqual(code("FAILED_PRECONDITION"));
    expect((await exec(vm.vm_id, 'cat $HOME/note; kill -0 "$(cat $HOME/pid)" 2>/dev/null && echo alive || echo ended')).stdout).toBe("kept\nended\n");
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("a command wakes a suspended machine; cancelling an Exec ends its process group", async () => {
    const vm = await create({ name: "waker" });
    await call("SuspendVm", { vm_id: vm.vm_id });
    expect(await exec(vm.vm_id, "echo awake; echo err >&2; exit 3")).toEqual({ stdout: "awake\n", stderr: "err\n", code: 3 });
    expect(await call("GetVm", { vm_id: vm.vm_id })).toMatchObject({ status: "running" });
    const stream = (client.Exec as unknown as (md: grpc.Metadata) => grpc.ClientDuplexStream<object, { data: Buffer }>)(auth());
    stream.on("error", () => undefined);
    const started = new Promise<void>((resolve) => stream.on("data", () => resolve()));
    stream.write({ vm_id: vm.vm_id, command: "sleep 300 & echo $! > /tmp/child; echo go; wait" });
    await started;
    stream.cancel();
    await sleep(300);
    expect((await exec(vm.vm_id, 'kill -0 "$(cat /tmp/child)" 2>/dev/null && echo alive || echo gone')).stdout).toBe("gone\n");
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("an Exec with tty runs the command on a real terminal: one output stream, input typed and echoed, the exit code last", async () => {
    const vm = await create({ name: "terminal" });
    const run = await new Promise<{ text: string; code: number }>((resolve, reject) => {
      const s = (client.Exec as unknown as (md: grpc.Metadata) => grpc.ClientDuplexStream<object, { data: Buffer; is_stderr: boolean; exit_code: number }>)(auth());
      let text = "";
      let code = -1;
      let typed = false;
      s.on("data", (chunk) => {
        if (chunk.data.length === 0) return void (code = chunk.exit_code);
        expect(chunk.is_stderr).toBe(false);
        text += chunk.data.toString();
        if (!typed && text.includes("name? ")) {
          typed = true;
          s.write({ stdin: true, data: Buffer.from("octo\r") });
        }
      });
      s.on("error", reject);
      s.on("end", () => resolve({ text, code }));
      s.write({ vm_id: vm.vm_id, command: `[ -t 0 ] && [ -t 1 ] && echo tty; echo err >&2; printf 'name? '; read n; echo "hi $n"; exit 4`, tty: true });
    });
    expect(run.code).toBe(4);
    expect(run.text).toContain("tty\r\nerr\r\n");
    expect(run.text).toContain("octo\r\nhi octo\r\n");
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("DestroyVm answers at once; the machine is listed as destroying until it is gone, then NOT_FOUND", async () => {
    const vm = await create({ name: "goner" });
    await call("DestroyVm", { vm_id: vm.vm_id });
    const seen = await call<{ status: string }>("GetVm", { vm_id: vm.vm_id }).catch((e: grpc.ServiceError) => ({ status: grpc.status[e.code] }));
    expect(["destroying", "NOT_FOUND"]).toContain(seen.status);
    for (
      let i = 0;
      i < 100 &&
      (await call("GetVm", { vm_id: vm.vm_id }).then(
        () => true,
        () => false,
      ));
      i++
    )
      await sleep(20);
    await expect(call("GetVm", { vm_id: vm.vm_id })).rejects.toEqual(code("NOT_FOUND"));
    await expect(call("DestroyVm", { vm_id: vm.vm_id })).rejects.toEqual(code("NOT_FOUND"));
  });

  it("the delete timer destroys the machine on boxd's clock; 0 turns it off; auto-suspend counts idle time", async () => {
    // boxd's clock by hand: nothing fires until the test moves it.
    const clock = createManualClock({ start: Date.now() });
    const e3 = await runEmulator(emulator, { options: { clock } });
    const c3 = new Service(e3.url.replace("http://", ""), grpc.credentials.createInsecure()) as Client;
    const t3 = ((await (await exchange(e3.credentials.apiKey!, e3)).json()) as { token: string }).token;
    const call3 = <T = Record<string, unknown>>(method: string, request: object): Promise<T> =>
      new Promise((resolve, reject) => c3[method]!.call(c3, request, auth(t3), (error: Error | null, response: T) => (error ? reject(error) : resolve(response))));
    const gone = async (id: string) => {
      while (
        await call3("GetVm", { vm_id: id }).then(
          () => true,
          () => false,
        )
      )
        await sleep(20);
    };
    try {
      const kept = await call3<{ vm_id: string }>("CreateVm", { name: "timer-off", config: { vcpu: 1 } });
      await call3("SetAutoDestroyTimeout", { vm_id: kept.vm_id, timeout_secs: 60 });
      await call3("SetAutoDestroyTimeout", { vm_id: kept.vm_id, timeout_secs: 0 });
      const doomed = await call3<{ vm_id: string }>("CreateVm", { name: "timer-on", config: { vcpu: 1 } });
      await call3("SetAutoDestroyTimeout", { vm_id: doomed.vm_id, timeout_secs: 60 });
      expect((await call3<{ destroy_at_unix: number }>("GetVm", { vm_id: doomed.vm_id })).destroy_at_unix).toBe(Math.floor((clock.now() + 60_000) / 1000));
      await clock.advance(59_000);
      expect(await call3("GetVm", { vm_id: doomed.vm_id })).toMatchObject({ status: "running" });
      await clock.advance(1_000);
      await gone(doomed.vm_id);
      await expect(call3("GetVm", { vm_id: doomed.vm_id })).rejects.toEqual(code("NOT_FOUND"));
      expect(await call3("GetVm", { vm_id: kept.vm_id })).toMatchObject({ status: "running", destroy_at_unix: 0 });

      // Auto-suspend after 60 s idle (no command in flight).
      await call3("SetAutoSuspendTimeout", { vm_id: kept.vm_id, timeout_secs: 60 });
      await clock.advance(59_000);
      expect(await call3("GetVm", { vm_id: kept.vm_id })).toMatchObject({ status: "running" });
      await clock.advance(1_000);
      while ((await call3<{ status: string }>("GetVm", { vm_id: kept.vm_id })).status === "running") await sleep(20);
      expect(await call3("GetVm", { vm_id: kept.vm_id })).toMatchObject({ status: "suspended" });
      await call3("DestroyVm", { vm_id: kept.vm_id });
      await gone(kept.vm_id);
    } finally {
      c3.close();
      await e3.close();
    }
  });
});

describe("boxd emulator: files and snapshots", () => {
  it("WriteFile creates the file with its mode; UploadFileStream lands 0644 with parents; older agents refuse WriteFile", async () => {
    const vm = await create({ name: "files" });
    expect(await upload("WriteFile", { vm_id: vm.vm_id, path: "/tmp/secret/in", mode: 0o600 }, Buffer.from("hush"))).toEqual({ bytes_written: 4 });
    expect((await exec(vm.vm_id, "stat -c '%a' /tmp/secret/in; cat /tmp/secret/in")).stdout).toBe("600\nhush");
    expect(await upload("UploadFileStream", { vm_id: vm.vm_id, path: "deep/er/file" }, Buffer.from("x"))).toEqual({ bytes_written: 1 });
    expect((await exec(vm.vm_id, "stat -c '%a' $HOME/deep/er/file")).stdout).toBe("644\n");
    await expect(upload("UploadFileStream", { vm_id: vm.vm_id, path: "/etc/nope" }, Buffer.from("x"))).rejects.toEqual(code("PERMISSION_DENIED"));
    control.setLegacyAgent(vm.vm_id, true);
    await expect(upload("WriteFile", { vm_id: vm.vm_id, path: "/tmp/x", mode: 0o600 }, Buffer.from("x"))).rejects.toEqual(code("UNIMPLEMENTED"));
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("a snapshot copies a running machine's disk; a restore keeps its size and refuses another", async () => {
    const vm = await create({ name: "snap-src", config: { vcpu: 2 } });
    await exec(vm.vm_id, "echo saved > $HOME/saved");
    expect(await call("CreateSnapshot", { vm: "snap-src", name: "snap-one" })).toMatchObject({ name: "snap-one", version: 1, status: "pending" });
    for (let i = 0; i < 100 && (await call<{ snapshot: { status: string } }>("GetSnapshot", { name: "snap-one" })).snapshot.status !== "ready"; i++) await sleep(20);
    expect((await call<{ snapshot: object }>("GetSnapshot", { name: "snap-one" })).snapshot).toMatchObject({ status: "ready", vcpu: 2, memory_bytes: 8 * 1024 ** 3 });
    await expect(call("CreateVmFromSnapshot", { snapshot: "snap-one", name: "snap-big", config: { vcpu: 4 } })).rejects.toEqual(code("INVALID_ARGUMENT"));
    await expect(call("CreateVmFromSnapshot", { snapshot: "no-such", name: "snap-none" })).rejects.toEqual(code("NOT_FOUND"));
    const restored = await call<{ vm_id: string }>("CreateVmFromSnapshot", { snapshot: "snap-one", name: "snap-dst" });
    expect((await exec(restored.vm_id, "cat $HOME/saved")).stdout).toBe("saved\n");
    expect(await call("GetVm", { vm_id: restored.vm_id })).toMatchObject({ vcpu: 2 });
    await call("StopVm", { vm_id: vm.vm_id });
    await expect(call("CreateSnapshot", { vm: vm.vm_id, name: "snap-two" })).rejects.toEqual(code("FAILED_PRECONDITION"));
    await call("DeleteSnapshot", { name: "snap-one" });
    await expect(call("GetSnapshot", { name: "snap-one" })).rejects.toEqual(code("NOT_FOUND"));
    for (const id of [vm.vm_id, restored.vm_id]) await call("DestroyVm", { vm_id: id });
  });

  it("ListSnapshots answers the key's org only, by name, each name's latest version; another org is fenced", async () => {
    const vm = await create({ name: "snap-list" });
    await call("CreateSnapshot", { vm: vm.vm_id, name: "list-b" });
    await call("CreateSnapshot", { vm: vm.vm_id, name: "list-a" });
    await call("CreateSnapshot", { vm: vm.vm_id, name: "list-b" });
    // One machine's work is serial: its next command runs after the copies.
    await exec(vm.vm_id, "true");
    try {
      const listed = (await call<{ snapshots: Array<{ name: string; version: number; status: string }> }>("ListSnapshots", {})).snapshots.filter((s) => s.name.startsWith("list-"));
      expect(listed.map(({ name, version, status }) => ({ name, version, status }))).toEqual([
        { name: "list-a", version: 1, status: "ready" },
        { name: "list-b", version: 2, status: "ready" },
      ]);
      const otherToken = ((await (await exchange(other.apiKey)).json()) as { token: string }).token;
      expect((await call<{ snapshots: unknown[] }>("ListSnapshots", {}, otherToken)).snapshots).toEqual([]);
      await expect(call("ListSnapshots", { org: other.org })).rejects.toEqual(code("PERMISSION_DENIED"));
    } finally {
      for (const name of ["list-a", "list-b"]) await call("DeleteSnapshot", { name });
      await call("DestroyVm", { vm_id: vm.vm_id });
    }
  });

  it("a snapshot deleted while it is being saved leaves no copy on disk", async () => {
    const vm = await create({ name: "snap-gone" });
    await exec(vm.vm_id, "head -c 1048576 /dev/zero > $HOME/blob");
    expect(await call("CreateSnapshot", { vm: vm.vm_id, name: "snap-gone" })).toMatchObject({ status: "pending" });
    await call("DeleteSnapshot", { name: "snap-gone" });
    // The machine's next command runs after the copy (one machine's work is serial).
    await exec(vm.vm_id, "true");
    const snapshotsDirs = readdirSync(scratchParent).map((root) => join(scratchParent, root, "snapshots"));
    expect(snapshotsDirs.flatMap((dir) => readdirSync(dir, { withFileTypes: true }).map((e) => e.name))).toEqual([]);
    await call("DestroyVm", { vm_id: vm.vm_id });
  });

  it("records every call with its gRPC code, and leaves nothing behind", async () => {
    const codes = new Set(emu.requests.list().map((r) => `${r.path.split("/").pop()} ${r.code}`));
    expect(codes).toEqual(expect.objectContaining({}));
    for (const expected of ["CreateVm OK", "CreateVm ALREADY_EXISTS", "Exec FAILED_PRECONDITION", "WriteFile UNIMPLEMENTED", "GetVm NOT_FOUND"]) expect(codes).toContain(expected);
    for (let i = 0; i < 100 && (await emu.leftovers()).length > 0; i++) await sleep(20);
    expect(await emu.leftovers()).toEqual([]);
  });
});

describe("boxd emulator: coverage", () => {
  it("every RPC of the proto and the documented ones outside it is classified, the refused answer UNIMPLEMENTED with their reason, and the README's table is current", async () => {
    const methods = Object.keys(Service.service);
    const report = coverageReport(BOXD_COVERAGE, boxdOperations(methods));
    expect(report.unclassified).toEqual([]);
    expect(report.stale).toEqual([]);
    expect(report.counts["not yet"]).toBe(0);
    const reboot = await new Promise<grpc.ServiceError | null>((resolve) =>
      client.makeUnaryRequest(
        "/boxd.api.v1.BoxdApi/RebootVm",
        (x: Buffer) => x,
        (x: Buffer) => x,
        Buffer.alloc(0),
        auth(),
        (error) => resolve(error),
      ),
    );
    expect(reboot).toMatchObject({ code: grpc.status.UNIMPLEMENTED, details: expect.stringMatching(/^emulator limit: not emulated/) });
    const readmeUrl = new URL("../README.md", import.meta.url);
    const readme = readFileSync(readmeUrl, "utf8");
    // UPDATE_COVERAGE=1 rewrites the README's generated table (between its coverage markers).
    if (process.env.UPDATE_COVERAGE) writeFileSync(readmeUrl, withCoverageTable(readme, coverageTable(report)));
    else expect(readme).toContain(coverageTable(report));
  });
});
