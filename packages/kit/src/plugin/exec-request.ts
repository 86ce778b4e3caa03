import type { PluginEnvironmentExecuteParams } from "@paperclipai/plugin-sdk";
import type { ExecRequest } from "../exec/script.js";

/** The kit's exec request for a host `execute` call; `cwd` defaults to the lease's workspace. */
export function execRequestFrom(params: PluginEnvironmentExecuteParams, defaultCwd: string): ExecRequest {
  return {
    command: params.command,
    args: params.args,
    cwd: params.cwd ?? defaultCwd,
    env: params.env,
    stdin: params.stdin,
    timeoutMs: params.timeoutMs,
  };
}
