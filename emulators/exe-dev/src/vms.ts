import type { SshHost, SshServer, SshSessionExit, SshSessionPty, SshSessionRequest } from "@paperclip-sandbox/emulator-kit";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { captureDisk, execOnPty, restoreDisk, type Sandbox, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";

/** One VM: a backend jail, reached over SSH at its own loopback port with its own host key. */
export interface Vm {
  name: string;
  /** The image asked for (recorded; every VM runs the host's tree in a jail). */
  image: string;
  cpu: number;
  memoryBytes: number;
  diskBytes: number;
  /** The environment `new --env` set (a copy keeps it: it is part of the VM, not of its disk). */
  env: Record<string, string>;
  tags: string[];
  comment?: string;
  createdAt: number;
  status: "running" | "deleting";
  host: SshHost;
  jail: Sandbox;
}

interface VmSpec {
  name: string;
  image: string;
  cpu: number;
  memoryBytes: number;
  diskBytes: number;
  env: Record<string, string>;
  tags: string[];
  comment?: string;
  setupScript?: string;
}

/** What `cp` may change of the VM it copies (exe.dev honours only these). */
interface CopySpec {
  name: string;
  cpu?: number;
  memoryBytes?: number;
  diskBytes?: number;
  /** The source's tags are copied (`--copy-tags`, default true). */
  copyTags: boolean;
}

export interface Fleet {
  /**
   * Holds a name from the moment `new` takes it until its VM is made or its launch fails, so a
   * second `new` of that name (a client retrying a create whose answer it lost) is refused as taken
   * instead of launching the VM twice. Undefined when the name is taken; else a release function.
   */
  reserve(name: string): (() => void) | undefined;
  /** Makes the VM of a name `reserve` holds. */
  create(spec: VmSpec): Promise<Vm>;
  /**
   * `cp`: a new VM (a name `reserve` holds) whose disk is a copy of the source's, taken at one moment
   * while the source keeps running (exe.dev clones a ZFS snapshot); the source's image, size and
   * environment unless overridden, a host key of its own, no first-boot script (its disk has booted).
   */
  copy(source: Vm, spec: CopySpec): Promise<Vm>;
  get(name: string): Vm | undefined;
  /** In creation order. */
  all(): Vm[];
  /** Deletes a VM: its connections dropped, its jail destroyed (confirmed). */
  remove(vm: Vm, lingerMs: number): Promise<void>;
  session(request: SshSessionRequest): Promise<SshSessionExit>;
  close(): Promise<void>;
}

export function createFleet(backend: SandboxBackend, ssh: SshServer, opts: { maxLifetimeMs: number; scratchDir: string }): Fleet {
  const vms = new Map<string, Vm>();
  const launching = new Set<string>();
  const lingering = new Set<NodeJS.Timeout>();
  // Removals under way (`rm` answers only once the VM is gone, but its client may hang up first): close waits for them.
  const removing = new Set<Promise<void>>();

  return {
    reserve(name) {
      if (vms.has(name) || launching.has(name)) return undefined;
      launching.add(name);
      return () => void launching.delete(name);
    },
    create: (spec) => launch(spec),
    async copy(source, spec) {
      if (source.status !== "running") throw new Error(`VM ${source.name} is being deleted`);
      const scratch = await mkdtemp(join(opts.scratchDir, "cp-"));
      try {
        await captureDisk(source.jail, join(scratch, "disk"));
        return await launch(
          {
            name: spec.name,
            image: source.image,
            cpu: spec.cpu ?? source.cpu,
            memoryBytes: spec.memoryBytes ?? source.memoryBytes,
            diskBytes: spec.diskBytes ?? source.diskBytes,
            env: { ...source.env },
            tags: spec.copyTags ? [...source.tags] : [],
          },
          join(scratch, "disk"),
        );
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    },
    get: (name) => vms.get(name),
    all: () => [...vms.values()],
    remove(vm, lingerMs) {
      const run = removeVm(vm, lingerMs);
      const tracked = run.catch(() => undefined);
      removing.add(tracked);
      void tracked.finally(() => removing.delete(tracked));
      return run;
    },
    async session(request) {
      const vm = vms.get(request.host);
      if (!vm || vm.status !== "running") {
        request.stderr.end("exe.dev: this VM is being deleted\n");
        return { exitCode: 255 };
      }
      if (request.command === null) {
        request.stdin.resume();
        request.stderr.end("exe.dev emulator: interactive shells are not supported (no PTY); pass a command\n");
        return { exitCode: 1 };
      }
      if (request.pty) return ptySession(vm.jail, request, request.pty);
      // As sshd does: the user's shell runs the command from the home directory (`$SHELL -c`). The
      // command reaches the shell in a variable (not spliced into a script), unset before it runs.
      const exit = await vm.jail.runner.run(USER_SHELL, {
        env: { SSH_ORIGINAL_COMMAND: request.command },
        stdin: request.stdin,
        stdout: request.stdout,
        stderr: request.stderr,
      });
      // A session without a PTY does not end its command when the client goes: exit() just says how it ended.
      return { exitCode: exit.exitCode, signal: exit.signal };
    },
    async close() {
      await Promise.all([...removing]);
      for (const timer of lingering) clearTimeout(timer);
      for (const vm of vms.values()) {
        await vm.host.close().catch(() => undefined);
        await backend.destroy(vm.name).catch(() => undefined);
      }
      vms.clear();
    },
  };

  /** A reserved name's VM: a jail (filled from `disk`, a copied disk, before anything runs), then its SSH endpoint. */
  async function launch(spec: VmSpec, disk?: string): Promise<Vm> {
    if (!launching.has(spec.name)) throw new Error(`exe.dev emulator: VM ${spec.name} was made without reserving its name`);
    const jail = await backend.create({
      id: spec.name,
      env: spec.env,
      limits: { cpu: spec.cpu, memoryMb: Math.round(spec.memoryBytes / (1024 * 1024)) },
      ttlMs: opts.maxLifetimeMs,
      labels: { "exe-dev-vm": spec.name },
    });
    let host: SshHost;
    try {
      if (disk) await restoreDisk(disk, jail);
      // The VM answers SSH only once its jail runs commands (a loaded machine starts the
      // supervisor late; a session arriving earlier would find nothing to run in).
      await untilRunning(jail);
      host = await ssh.addHost(spec.name);
    } catch (error) {
      await backend.destroy(spec.name).catch(() => undefined);
      throw error;
    }
    const vm: Vm = {
      name: spec.name,
      image: spec.image,
      cpu: spec.cpu,
      memoryBytes: spec.memoryBytes,
      diskBytes: spec.diskBytes,
      env: spec.env,
      tags: spec.tags,
      comment: spec.comment,
      createdAt: Date.now(),
      status: "running",
      host,
      jail,
    };
    vms.set(vm.name, vm);
    // The first-boot script (exe.dev runs it as the VM's user): done before `new` answers here.
    if (spec.setupScript) await jail.runner.run(spec.setupScript, {}).catch(() => undefined);
    return vm;
  }

  async function removeVm(vm: Vm, lingerMs: number): Promise<void> {
    vm.status = "deleting";
    await vm.host.close();
    await backend.destroy(vm.name);
    const forget = () => {
      if (vms.get(vm.name) === vm) vms.delete(vm.name);
    };
    // The VM is gone; with a linger `ls` still lists it (as "deleting") for a while, as a slow control plane would.
    if (lingerMs <= 0) return forget();
    const timer = setTimeout(forget, lingerMs);
    lingering.add(timer);
  }
}

/** The user's shell running the session's command from the home directory, the command in a variable. */
const USER_SHELL = `cd "$HOME" 2>/dev/null || cd /; __c=$SSH_ORIGINAL_COMMAND; unset SSH_ORIGINAL_COMMAND; eval "$__c"`;
/** Between the hang-up of a terminal whose client went and SIGKILL to what is left. */
const HANGUP_GRACE_MS = 1_000;

/**
 * A session with a PTY (`ssh -t`), as a VM's sshd runs it: the command leads a session on a real
 * terminal in the jail of the size the client asked for, every byte typed goes to the terminal and
 * everything it shows comes back on stdout, a window-change resizes it, and unlike a session
 * without a PTY the command is hung up (SIGHUP, then SIGKILL) when its client goes.
 */
async function ptySession(jail: Sandbox, request: SshSessionRequest, pty: SshSessionPty): Promise<SshSessionExit> {
  const terminal = await execOnPty(jail, {
    argv: ["/bin/sh", "-c", USER_SHELL],
    env: { SSH_ORIGINAL_COMMAND: request.command ?? "", ...(pty.term ? { TERM: pty.term } : {}) },
    cols: pty.cols,
    rows: pty.rows,
  });
  const handle = terminal.handle;
  let writes = Promise.resolve();
  request.stdin.on("data", (chunk: Buffer) => {
    request.stdin.pause();
    writes = writes
      .then(() => handle.write(chunk))
      .catch(() => undefined)
      .then(() => void request.stdin.resume());
  });
  request.stdin.on("error", () => undefined);
  pty.onResize(({ cols, rows }) => {
    if (cols > 0 && rows > 0) void terminal.resize(cols, rows).catch(() => undefined);
  });
  const subscription = handle.subscribe(
    { stdout: 0, stderr: 0 },
    {
      onData: (stream, data) => {
        const sink = stream === "stdout" ? request.stdout : request.stderr;
        if (!sink.write(data)) {
          subscription.pause();
          sink.once("drain", () => subscription.resume());
        }
      },
    },
  );
  // Settles (never rejects: closing the handle below drops its connection) once the program is gone.
  const gone = handle.exited.then(
    () => true,
    () => true,
  );
  const hangUp = async () => {
    await terminal.signal("SIGHUP", { group: true }).catch(() => undefined);
    const ended = await Promise.race([gone, new Promise<false>((resolve) => setTimeout(() => resolve(false), HANGUP_GRACE_MS).unref())]);
    if (!ended) await terminal.signal("SIGKILL", { group: true }).catch(() => undefined);
  };
  if (request.signal.aborted) void hangUp();
  else request.signal.addEventListener("abort", () => void hangUp(), { once: true });
  try {
    const exit = await subscription.done;
    return { exitCode: exit?.exitCode ?? null, signal: exit?.signal ?? null };
  } finally {
    subscription.close();
    handle.close();
  }
}

async function untilRunning(jail: Sandbox, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const exit = await jail.runner.run("true", {});
      if (exit.exitCode === 0) return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`VM jail ${jail.id} did not start running commands within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
