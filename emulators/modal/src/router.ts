import { GrpcError, GrpcStatus, type GrpcCall, type GrpcHandler } from "@paperclip-sandbox/emulator-kit";
import { stdinWriteV2, stdioReadV2 } from "./entrypoint-stdio.js";
import type { ImageStore } from "./images.js";
import type { EmulatedProcess, ExitStatus } from "./process.js";
import { ptyOf, type PtyInfoMessage, type SandboxManager, type SandboxRecord } from "./sandboxes.js";
import type { TokenIssuer } from "./tokens.js";
import { STDERR_CONFIG_STDOUT, STDIO_FD } from "./wire.js";

export interface RouterDeps {
  sandboxes: SandboxManager;
  images: ImageStore;
  issuer: TokenIssuer;
}

interface SecretSource {
  secret_id?: string;
  env?: { contents: Record<string, string> } | null;
}

type StdinStreamMessage = { item?: "start" | "data" | "end"; start?: { task_id: string; exec_id: string; offset: number }; data?: Buffer };

function exitMessage(status: ExitStatus | null) {
  if (!status) return {};
  return "code" in status ? { code: status.code } : { signal: status.signal };
}

/** The handlers of modal.task_command_router.TaskCommandRouter. */
export function routerHandlers(deps: RouterDeps): Record<string, GrpcHandler> {
  const { sandboxes } = deps;

  /** The router token (authorization: Bearer) must be one minted for this task. */
  const authorized = (call: GrpcCall, taskId: string) => {
    const raw = call.metadata.get("authorization")[0];
    const match = /^Bearer\s+(\S+)$/i.exec(typeof raw === "string" ? raw : "");
    const claims = deps.issuer.verify(match?.[1], "router");
    if (!claims) throw new GrpcError(GrpcStatus.UNAUTHENTICATED, "invalid or expired command router token");
    if (claims.sub !== taskId) throw new GrpcError(GrpcStatus.PERMISSION_DENIED, "the command router token is for another task");
  };

  const task = async (call: GrpcCall, taskId: string): Promise<SandboxRecord> => {
    authorized(call, taskId);
    return sandboxes.runningTask(taskId);
  };

  /** An exec of a task, also after the sandbox finished (its output and exit stay readable). */
  const processOf = (call: GrpcCall, taskId: string, execId: string): { record: SandboxRecord; process: EmulatedProcess } => {
    authorized(call, taskId);
    const record = sandboxes.all().find((s) => s.taskId === taskId);
    const process = record?.execs.get(execId);
    if (!record || !process) throw new GrpcError(GrpcStatus.NOT_FOUND, `exec ${execId} not found in task ${taskId}`);
    sandboxes.touch(record);
    return { record, process };
  };

  const secretEnv = (sources: readonly SecretSource[]) => {
    const env: Record<string, string> = {};
    for (const source of sources) {
      if (source.env) Object.assign(env, source.env.contents);
      else if (source.secret_id) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "emulator limit: exec secrets by id are not supported (pass env)");
    }
    return env;
  };

  return {
    async TaskExecStart(
      request: {
        task_id: string;
        exec_id: string;
        command_args: string[];
        stderr_config: number;
        timeout_secs?: number;
        workdir?: string;
        pty_info: PtyInfoMessage | null;
        env: Record<string, string>;
        secret_sources: SecretSource[];
      },
      call: GrpcCall,
    ) {
      const record = await task(call, request.task_id);
      if (!request.exec_id) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "exec_id is required");
      await sandboxes.startExec(record, {
        execId: request.exec_id,
        argv: request.command_args,
        workdir: request.workdir,
        timeoutSecs: request.timeout_secs,
        env: { ...request.env, ...secretEnv(request.secret_sources) },
        stderrToStdout: request.stderr_config === STDERR_CONFIG_STDOUT,
        ...(request.pty_info?.enabled ? { pty: ptyOf(request.pty_info) } : {}),
      });
      return {};
    },

    async TaskExecStdioRead(request: { task_id: string; exec_id: string; offset: number; file_descriptor: number }, call: GrpcCall) {
      const { process } = processOf(call, request.task_id, request.exec_id);
      const stream = request.file_descriptor === STDIO_FD.STDERR ? "stderr" : "stdout";
      // The stream stays open until the process's output ends (its exit): an early end reads as EOF.
      await process.read(stream, request.offset, (data) => call.write({ data }), call.signal);
    },

    async TaskExecWait(request: { task_id: string; exec_id: string }, call: GrpcCall) {
      const { process } = processOf(call, request.task_id, request.exec_id);
      // Long-polls until the exit; the SDK's 60 s deadline ends the call first and it asks again.
      const status = await Promise.race([process.exit, new Promise<null>((resolve) => call.signal.addEventListener("abort", () => resolve(null), { once: true }))]);
      return exitMessage(status);
    },

    TaskExecPoll(request: { task_id: string; exec_id: string }, call: GrpcCall) {
      return exitMessage(processOf(call, request.task_id, request.exec_id).process.exited());
    },

    async TaskExecStdinWrite(request: { task_id: string; exec_id: string; offset: number; data: Buffer; eof: boolean }, call: GrpcCall) {
      const { process } = processOf(call, request.task_id, request.exec_id);
      await process.writeStdin(request.offset, request.data, request.eof);
      return {};
    },

    async TaskExecStdinWriteStream(messages: AsyncIterable<StdinStreamMessage>, call: GrpcCall) {
      let process: EmulatedProcess | undefined;
      let offset = 0;
      for await (const message of messages) {
        if (message.item === "start" && message.start) {
          if (process) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "the stdin stream was started twice");
          process = processOf(call, message.start.task_id, message.start.exec_id).process;
          offset = message.start.offset;
          if (offset > process.stdinStatus().written) throw new GrpcError(GrpcStatus.OUT_OF_RANGE, `stdin stream starts at ${offset} but only ${process.stdinStatus().written} bytes were written`);
          continue;
        }
        if (!process) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "the stdin stream must begin with start");
        if (message.item === "data" && message.data) {
          await process.writeStdin(offset, message.data, false);
          offset += message.data.length;
        } else if (message.item === "end") {
          await process.writeStdin(offset, Buffer.alloc(0), true);
        }
      }
      return {};
    },

    TaskExecStdinStatus(request: { task_id: string; exec_id: string }, call: GrpcCall) {
      const status = processOf(call, request.task_id, request.exec_id).process.stdinStatus();
      return { num_bytes_written: status.written, closed: status.closed };
    },

    async SandboxStdioReadV2(request: { task_id: string; offset: number; file_descriptor: number }, call: GrpcCall) {
      authorized(call, request.task_id);
      const record = sandboxes.all().find((s) => s.taskId === request.task_id);
      if (!record) throw new GrpcError(GrpcStatus.NOT_FOUND, `Task ${request.task_id} not found`);
      await stdioReadV2(record, request, call);
    },

    async SandboxStdinWriteV2(request: { task_id: string; offset: number; data: Buffer; eof: boolean }, call: GrpcCall) {
      authorized(call, request.task_id);
      // Also after the sandbox finished: stdin for an exited entrypoint goes nowhere, as with a pipe nobody reads.
      const record = sandboxes.all().find((s) => s.taskId === request.task_id);
      if (!record) throw new GrpcError(GrpcStatus.NOT_FOUND, `Task ${request.task_id} not found`);
      await stdinWriteV2(record, request);
      return {};
    },

    async SandboxWaitUntilReady(request: { task_id: string }, call: GrpcCall) {
      const record = await task(call, request.task_id);
      return { ready_at: record.createdAt / 1000 };
    },

    async TaskSnapshotFilesystem(request: { task_id: string; snapshot_id: string; ttl_seconds?: number }, call: GrpcCall) {
      const record = await task(call, request.task_id);
      const image = await deps.images.snapshot(request.snapshot_id, request.ttl_seconds, (imageId) => sandboxes.snapshot(record, imageId));
      return { image_id: image.id };
    },
  };
}
