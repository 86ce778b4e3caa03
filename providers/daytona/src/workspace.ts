import type { Sandbox } from "@daytonaio/sdk";
import type { DaytonaClient } from "./client.js";

/** The lease's workspace, under the sandbox user's home (as upstream's provider puts it). */
const WORKSPACE_NAME = "paperclip-workspace";
const MARK = "PAPERCLIP_WORKDIR=";

/** Makes the workspace directory and returns its absolute path (one call; profile noise is ignored). */
export async function prepareWorkspace(client: DaytonaClient, sandbox: Sandbox): Promise<string> {
  const script = `mkdir -p "$HOME/${WORKSPACE_NAME}" && cd "$HOME/${WORKSPACE_NAME}" && printf '\\n${MARK}%s\\n' "$(pwd -P)"`;
  const response = await client.call("executeCommand", () => sandbox.process.executeCommand(script), { idempotent: true });
  const line = response.result.split("\n").find((candidate) => candidate.startsWith(MARK));
  const path = line?.slice(MARK.length).trim();
  if (response.exitCode !== 0 || !path?.startsWith("/")) {
    throw new Error(`daytona sandbox ${sandbox.id}: could not create the workspace under $HOME (exit ${response.exitCode}): ${client.redact(response.result.slice(-300))}`);
  }
  return path;
}

/** The workspace a lease reported at acquire (`metadata.remoteCwd`), when it is a plausible one. */
export function workspaceFrom(metadata: Record<string, unknown>): string | undefined {
  const cwd = metadata.remoteCwd;
  return typeof cwd === "string" && cwd.startsWith("/") && !cwd.split("/").includes("..") ? cwd : undefined;
}
