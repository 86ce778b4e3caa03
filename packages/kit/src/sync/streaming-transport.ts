import type { ScriptRunner } from "../transport.js";
import { SyncError } from "./errors.js";

/**
 * Streaming sync sends raw tar bytes over stdin and stdout. Over a transport that is not binary-safe
 * (output carried as JSON strings, say) the bytes `00 ff 80 0a c8` come back as `00 ef bf bd ef` with
 * no error anywhere, so refuse up front, before anything is written. `syncFor` picks a strategy that fits.
 */
export function assertStreamingTransport(runner: ScriptRunner): void {
  const caps = runner.capabilities;
  const problems = [
    caps.binarySafe ? null : "it is not binary-safe",
    caps.stdin === "stream" ? null : `its stdin is ${caps.stdin}, not streamed`,
    caps.stdinEof ? null : "its stdin gets no EOF",
  ].filter((problem): problem is string => problem !== null);
  if (problems.length > 0) {
    throw new SyncError("SYNC_TRANSPORT_UNSUITABLE", `streaming sync cannot run over this transport (${problems.join("; ")}); use syncFor(runner, files) to pick a strategy`);
  }
}
