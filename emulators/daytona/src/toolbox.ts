import { HttpError, type HttpContext, type WebSocketContext } from "@paperclip-sandbox/emulator-kit";
import type { Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";
import type { Fleet } from "./fleet.js";
import type { SandboxRecord } from "./records.js";

/** The toolbox's working directory (the image's WORKDIR on Daytona; the sandbox user's home here). */
export const WORK_DIR = "/home/sandbox";

/** An in-sandbox path as the daemon takes it: relative paths are relative to the work dir. */
export function sandboxPath(path: unknown, field = "path"): string {
  if (typeof path !== "string" || path === "" || path.includes("\0") || /[\r\n]/.test(path)) {
    throw new HttpError(400, `${field}: must be a non-empty path`, { code: "INVALID_FILE_PATH" });
  }
  return path.startsWith("/") ? path : `${WORK_DIR}/${path}`;
}

export interface ToolboxTarget {
  record: SandboxRecord;
  jail: Jail;
}

/**
 * The toolbox proxy's part of a request: the sandbox must exist and be started, and it counts as
 * active (auto-stop waits) while the request is open. A stopped sandbox answers 502 with the
 * `X-Daytona-Sandbox-State` header, as the proxy does when it cannot reach the daemon.
 */
export function toolboxTarget(fleet: Fleet, ctx: Pick<HttpContext | WebSocketContext, "params">): ToolboxTarget {
  const id = ctx.params.sandboxId!;
  const record = fleet.find(id);
  if (!record || record.id !== id || record.state === "destroyed") {
    throw new HttpError(404, `sandbox container not found: ${id}`, { details: { source: "DAYTONA_PROXY" } });
  }
  if (record.state !== "started" || !record.jail) {
    throw new HttpError(502, `sandbox ${id} is not running (state: ${record.state})`, {
      code: "SANDBOX_NOT_STARTED",
      details: { source: "DAYTONA_PROXY" },
      headers: { "x-daytona-sandbox-state": record.state },
    });
  }
  fleet.touch(record);
  return { record, jail: record.jail };
}

/** Keeps the sandbox active for as long as `work` runs. */
export async function whileActive<T>(fleet: Fleet, record: SandboxRecord, work: () => Promise<T>): Promise<T> {
  record.activeRequests += 1;
  try {
    return await work();
  } finally {
    record.activeRequests -= 1;
    fleet.touch(record);
  }
}
