import { constants } from "node:os";
import { GrpcError, GrpcStatus, type GrpcCall } from "@paperclip-sandbox/emulator-kit";
import { execOnPty, SandboxExecError, type ExecHandle, type PtyExec } from "@paperclip-sandbox/sandbox-backend";
import { GUEST_USER, type MachineManager } from "./machines.js";
import type { BoxdAccount } from "./options.js";

/** The decoded `ExecChunk` fields the emulator reads. */
export interface ExecChunk {
  data: Buffer;
  stdin: boolean;
  tty: boolean;
  command: string;
  vm_id: string;
  exit_code: number;
  is_stderr: boolean;
}

/** The guest user's home: commands start there. */
export const GUEST_HOME = GUEST_USER.home;
/** Each output stream is kept up to this many bytes in the supervisor while the client reads. */
const OUTPUT_RING_BYTES = 16 * 1024 * 1024;
const SIGNALS = constants.signals as Record<string, number>;

/**
 * `Exec`: the first chunk names the machine and the command (run by the guest's `sh -c`), later
 * chunks with `stdin` carry its stdin, and the client's half-close is EOF. Output goes back as it
 * comes (`is_stderr` for stderr), then one chunk with the exit code (128 + the signal's number for a
 * command a signal ended). A suspended or hibernated machine wakes first; a stopped one is refused.
 * Cancelling the call ends the command's whole process group; background processes it left outside
 * its group (`setsid`, `nohup … &` after its exit) keep running, as on a VM. With `tty` the command
 * runs on a pseudo-terminal (what is typed is its input, its output one stream).
 */
export async function serveExec(machines: MachineManager, account: BoxdAccount, input: AsyncIterable<ExecChunk>, call: GrpcCall): Promise<void> {
  const iterator = input[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "the first Exec chunk must carry vm_id and command");
  const head = first.value;
  if (!head.command) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "command: required in the first Exec chunk");
  const machine = machines.find(account, head.vm_id);
  const lease = await machines.use(machine);
  let handle: ExecHandle;
  let terminal: PtyExec | undefined;
  try {
    // Detached: a blip of the emulator's connection to the jail's supervisor must not end the
    // command (a VM's processes do not die with its agent's connection); it is re-attached by pid.
    const common = { argv: ["/bin/sh", "-c", head.command], cwd: GUEST_HOME, detached: true, outputLimitBytes: OUTPUT_RING_BYTES };
    if (head.tty) {
      // `tty`: the command leads a session on a real terminal (no size: ExecChunk carries none);
      // stdin is what is typed, the output one stream.
      terminal = await execOnPty(lease.jail, { ...common, cols: 0, rows: 0 });
      handle = terminal.handle;
    } else handle = await lease.jail.exec({ ...common, stdin: true });
  } catch (error) {
    lease.done();
    // A refusal of the command itself vs the in-VM agent not answering (which boxd reports as unavailable).
    if (error instanceof SandboxExecError) throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, `exec failed: ${error.message}`);
    throw new GrpcError(GrpcStatus.UNAVAILABLE, `the machine's agent did not answer: ${(error as Error).message}`);
  }
  const pid = handle.pid;

  const cancelled = () => {
    // The client gave up: the command's process group ends with the call (on a terminal, the
    // terminal's session too: its program leads a session of its own).
    void terminal?.signal("SIGKILL", { group: true }).catch(() => undefined);
    void handle.signal("SIGKILL", { group: true }).catch(() => undefined);
  };
  call.signal.addEventListener("abort", cancelled, { once: true });
  // Stdin as it comes; the end of the client's stream is EOF. Bytes for an exited command go nowhere.
  void (async () => {
    try {
      if (head.stdin && head.data.length > 0) await handle.write(head.data);
      for (;;) {
        const next = await iterator.next();
        if (next.done) break;
        if (next.value.stdin && next.value.data.length > 0) await handle.write(next.value.data).catch(() => undefined);
      }
    } catch {
      // The call ended (cancelled): nothing more to feed.
    } finally {
      await handle.closeStdin().catch(() => undefined);
    }
  })();

  // Output from where the client is: a re-attached handle continues at the next byte of each stream.
  const next = { stdout: 0, stderr: 0 };
  try {
    for (let attempt = 0; ; attempt += 1) {
      const subscription = handle.subscribe(
        { ...next },
        {
          onData: (stream, data, offset) => {
            next[stream] = offset + data.length;
            call.write({ data, is_stderr: stream === "stderr" });
          },
          onGap: (stream, from, to) => call.write({ data: Buffer.from(`\n[boxd emulator: ${stream} bytes ${from}-${to} dropped: the client read too slowly]\n`), is_stderr: true }),
        },
      );
      const exit = await subscription.done.catch(() => null);
      if (call.signal.aborted) return;
      if (exit) {
        const code = exit.exitCode ?? 128 + (SIGNALS[exit.signal ?? "SIGKILL"] ?? 9);
        call.write({ data: Buffer.alloc(0), exit_code: code });
        return;
      }
      // The connection to the supervisor broke, or the machine stopped (then nothing is left to attach).
      const again = machine.status === "running" && attempt < 3 ? await lease.jail.attach(pid).catch(() => null) : null;
      if (!again) throw new GrpcError(GrpcStatus.ABORTED, `machine ${machine.name} stopped while the command ran`);
      handle.close();
      handle = again;
    }
  } finally {
    call.signal.removeEventListener("abort", cancelled);
    // After the exit, dropping the connection ends nothing; the finished exec is forgotten.
    handle.close();
    void lease.jail.reap(pid).catch(() => undefined);
    lease.done();
  }
}
