import { GrpcError, GrpcStatus, type GrpcCall } from "@paperclip-sandbox/emulator-kit";
import type { OutputStreamName } from "@paperclip-sandbox/sandbox-backend";
import type { SandboxRecord } from "./sandboxes.js";
import { seconds } from "./wire.js";

/** Longest a SandboxGetLogs call stays open without news (the SDK asks for 55 s and reconnects). */
const MAX_LOGS_WAIT_SECS = 55;

/**
 * Reads the entrypoint's `stream` from `offset`, sending each chunk as it comes, until the output
 * ends (the entrypoint exited) or `signal` aborts. A sandbox without an entrypoint has no output:
 * its stream ends when the sandbox does.
 */
async function readEntrypoint(record: SandboxRecord, stream: OutputStreamName, offset: number, send: (data: Buffer, at: number) => void, signal: AbortSignal): Promise<boolean> {
  const process = record.entrypoint;
  if (!process) {
    await Promise.race([record.finished, new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }))]);
    return !signal.aborted;
  }
  let position = offset;
  let source = process;
  for (;;) {
    await source.read(
      stream,
      position,
      (data) => {
        if (data.length === 0) return; // an empty chunk means an error to the SDK
        send(data, position);
        position += data.length;
      },
      signal,
    );
    if (signal.aborted) return false;
    // The sandbox finished while this read was live: its output was kept in memory before the jail
    // went, and the jail's going may have cut this read short. The rest comes from what was kept.
    const kept = record.entrypoint;
    if (!kept || kept === source) return true;
    source = kept;
  }
}

/** V2 (router): `SandboxStdioReadV2` streams `{data, starting_offset}` from any offset, ending at the entrypoint's EOF. */
export async function stdioReadV2(record: SandboxRecord, request: { offset: number; file_descriptor: number }, call: GrpcCall): Promise<void> {
  const stream: OutputStreamName = request.file_descriptor === 1 ? "stderr" : "stdout";
  await readEntrypoint(record, stream, Number(request.offset), (data, at) => call.write({ data, starting_offset: at }), call.signal);
}

/** V2 (router): `SandboxStdinWriteV2` by offset (a retried write's old bytes are dropped). */
export async function stdinWriteV2(record: SandboxRecord, request: { offset: number; data: Buffer; eof: boolean }): Promise<void> {
  if (!record.entrypoint) throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, "the Sandbox has no entrypoint command to take stdin");
  await record.entrypoint.writeStdin(Number(request.offset), request.data, request.eof);
}

/**
 * V1 (control plane): `SandboxGetLogs` streams `TaskLogsBatch`es of the entrypoint's output as text
 * from `last_entry_id` (the byte offset, `1-<offset>`; the SDK starts at `0-0`), for up to `timeout`
 * seconds, and a final batch with `eof` once the output has ended.
 */
export async function getLogsV1(record: SandboxRecord, request: { file_descriptor: number; timeout: number; last_entry_id: string }, call: GrpcCall): Promise<void> {
  const stream: OutputStreamName = request.file_descriptor === 2 ? "stderr" : "stdout";
  const offset = Number(/^\d+-(\d+)$/.exec(request.last_entry_id ?? "")?.[1] ?? 0);
  const waitSecs = Math.min(MAX_LOGS_WAIT_SECS, request.timeout > 0 ? request.timeout : MAX_LOGS_WAIT_SECS);
  const window = new AbortController();
  const timer = setTimeout(() => window.abort(), waitSecs * 1000);
  timer.unref();
  call.signal.addEventListener("abort", () => window.abort(), { once: true });
  let position = offset;
  try {
    const ended = await readEntrypoint(
      record,
      stream,
      offset,
      (data, at) => {
        position = at + data.length;
        call.write({
          task_id: record.taskId,
          sandbox_id: record.id,
          items: [{ data: data.toString("utf8"), file_descriptor: request.file_descriptor, timestamp: seconds(Date.now()) }],
          entry_id: `1-${position}`,
        });
      },
      window.signal,
    );
    if (ended) call.write({ task_id: record.taskId, sandbox_id: record.id, items: [], entry_id: `1-${position}`, eof: true });
  } finally {
    clearTimeout(timer);
  }
}

/** V1 (control plane): `SandboxStdinWrite` indexed from 1; a repeated index (a retry) is dropped. */
export async function stdinWriteV1(record: SandboxRecord, request: { input: Buffer; index: number; eof: boolean }): Promise<void> {
  if (!record.entrypoint) throw new GrpcError(GrpcStatus.FAILED_PRECONDITION, "the Sandbox has no entrypoint command to take stdin");
  if (request.index <= record.stdinIndex) return;
  record.stdinIndex = request.index;
  const written = record.entrypoint.stdinStatus().written;
  await record.entrypoint.writeStdin(written, request.input, request.eof);
}
