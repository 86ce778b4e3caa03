import { timedOutExit, type ScriptRunner } from "../transport.js";

/**
 * Every script ends by `deadlineMs` at the latest (a lease's ceiling, e.g. a pod's activity
 * deadline), whatever the caller asked: the run is aborted then, and its exit says `timeout`
 * (not `aborted`: nobody cancelled it).
 */
export function withDeadline(inner: ScriptRunner, deadlineMs: number): ScriptRunner {
  return {
    capabilities: inner.capabilities,
    async run(script, io) {
      const controller = new AbortController();
      let reached = false;
      const timer = setTimeout(() => {
        reached = true;
        controller.abort();
      }, deadlineMs);
      const onAbort = () => controller.abort();
      io.signal?.addEventListener("abort", onAbort, { once: true });
      if (io.signal?.aborted) controller.abort();
      try {
        const exit = await inner.run(script, { ...io, signal: controller.signal });
        return reached && exit.reason === "aborted" && !io.signal?.aborted ? timedOutExit(exit.signal ?? "SIGKILL", exit.pid) : exit;
      } finally {
        clearTimeout(timer);
        io.signal?.removeEventListener("abort", onAbort);
      }
    },
  };
}
