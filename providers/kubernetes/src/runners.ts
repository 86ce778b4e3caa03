import { ChannelExecError, createChannelExecRunner, withCommandChannel, withDeadline, withInlineEnv, withRemoteGroupKill, withScriptPty, type ScriptRunner } from "@paperclip-sandbox/kit";
import { call, execConnector, type KubeClients } from "./kube.js";
import { CONTAINER } from "./manifests.js";
import type { WorkloadRef } from "./names.js";
import { jobPodName } from "./workload.js";

/**
 * Pod exec: the kit's channel runner over client-node's WebSocket (v5 half-close where served,
 * length-framed stdin otherwise), env inlined (exec has no env field), abort by a second exec that
 * ends the script's process group, and the activity deadline as a ceiling (reported as a timeout).
 * Pseudo-terminals (the host's agent login) come from util-linux `script` in the container over the
 * same streamed exec, so every signal, resize and exit goes through the one exec path; an image
 * without `script` refuses the login with a clear error.
 */
export function podRunner(clients: KubeClients, namespace: string, pod: string, deadlineMs: number, lease?: string): ScriptRunner {
  const channel = withInlineEnv(createChannelExecRunner({ connect: execConnector(clients, namespace, pod, CONTAINER), memory: clients.execProtocol }));
  const exec = withRemoteGroupKill(channel);
  const runner = withDeadline(lease === undefined ? exec : withCommandChannel(exec, { lease, signalsAsExitStatus: true }), deadlineMs);
  // The terminal goes over the plain exec: the group-kill wrapper starts its job as an asynchronous
  // list, which ignores SIGINT (and no shell below can undo that), so ^C would never reach the
  // program; the terminal ends its program itself (hang-up, then SIGKILL, through its control file).
  const { pty } = withScriptPty(channel);
  return { capabilities: Object.freeze({ ...runner.capabilities, pty: true }), run: (script, io) => runner.run(script, io), ...(pty ? { pty } : {}) };
}

class JobBackendError extends Error {
  readonly code = "KUBERNETES_JOB_BACKEND_NO_EXEC";
  constructor(message: string) {
    super(message);
    this.name = "JobBackendError";
  }
}

/**
 * The job backend's "runner": a Job runs its entrypoint once and takes no commands, so every
 * command (and so every sync, native or base64) fails with this, naming the Job's state and the end
 * of its log, instead of hanging or pretending.
 */
export function jobRunner(clients: KubeClients, ref: WorkloadRef, capabilities: ScriptRunner["capabilities"]): ScriptRunner {
  const refuse = async (): Promise<never> => {
    let state = "unknown";
    let tail = "";
    try {
      const job = await call("readJob", true, () => clients.batch.readNamespacedJob({ namespace: ref.namespace, name: ref.name }));
      const done = (job.status?.conditions ?? []).find((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
      state = done ? `${done.type}${done.reason ? ` (${done.reason})` : ""}` : (job.status?.active ?? 0) > 0 ? "running" : "pending";
      const pod = await jobPodName(clients, ref);
      if (pod) {
        const log = await call("readPodLog", true, () => clients.core.readNamespacedPodLog({ namespace: ref.namespace, name: pod, tailLines: 5 })).catch(() => "");
        tail = String(log).trim();
      }
    } catch {
      /* the message below still says what the backend cannot do */
    }
    throw new JobBackendError(
      `the kubernetes job backend runs no commands: Job ${ref.namespace}/${ref.name} runs its image's entrypoint once (state: ${state}), with no exec and no file sync (nor a terminal); use backend sandbox-cr for command execution${tail ? `. Its log ends: ${tail.slice(-500)}` : ""}`,
    );
  };
  // The driver declares a PTY (the sandbox-cr backend has one): a login on a Job refuses like a command.
  return { capabilities, run: refuse, ...(capabilities.pty ? { pty: { open: refuse } } : {}) };
}

/** Checked once at acquire: what native sync and every command need in the image. */
export async function checkImageTools(runner: ScriptRunner, image: string): Promise<void> {
  const script = "command -v tar >/dev/null 2>&1 || echo tar; { command -v realpath >/dev/null 2>&1 || readlink -f / >/dev/null 2>&1; } || echo 'realpath or readlink -f'";
  let out = "";
  try {
    const exit = await runner.run(script, { stdout: (chunk) => (out += chunk.toString("utf8")) });
    if (exit.exitCode !== 0) out += ` (check exited ${exit.exitCode})`;
  } catch (error) {
    if (error instanceof ChannelExecError && error.code === "CHANNEL_EXEC_FAILED") {
      throw new Error(`image ${image} cannot run /bin/sh (${error.message}): commands and native sync need sh, tar and realpath or readlink -f`);
    }
    throw error;
  }
  const missing = out.trim().split("\n").filter(Boolean);
  if (missing.length > 0) throw new Error(`image ${image} lacks ${missing.join(", ")}: native sync needs sh, tar and realpath or readlink -f in the image`);
}
