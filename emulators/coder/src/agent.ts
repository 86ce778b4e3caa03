/**
 * A workspace agent inside its jail, as the Coder agent behaves for the API: `connecting` then
 * `connected`; lifecycle `created` → `starting` while the startup script runs → `ready` (exit 0),
 * `start_error` (non-zero) or `start_timeout`; app healthchecks as the agent runs them
 * (agent/apphealth.go): an answer below 500 (redirects followed as Go's client does) makes an app
 * `healthy`, and a failure after `threshold` failures in a row makes it `unhealthy`, from
 * `initializing` too; a check with no positive interval or threshold never runs (the app stays
 * `initializing`). Stopping: `shutting_down` → `off`.
 */
import type { VendorClock } from "@paperclip-sandbox/emulator-kit";
import type { Sandbox } from "@paperclip-sandbox/sandbox-backend";
import type { AgentRecord } from "./model.js";
import type { AgentSpec } from "./options.js";
import { probe, type WorkspaceAgentPool } from "./workspace-net.js";

/** A check waits at least this long: the emulator's tunnel into the jail takes a moment to open where the agent's local connection does not. */
const HEALTHCHECK_MIN_TIMEOUT_MS = 2_000;

export interface AgentRuntime {
  /** Stops the agent's loops (healthchecks); the jail is the caller's. */
  stop(): void;
}

export interface AgentTiming {
  clock: VendorClock;
  agentConnectMs: number;
  healthPollMs: number;
}

/** Runs the agent of a started workspace; `touched` is called whenever a field of `agent` changed. */
export function runAgent(agent: AgentRecord, spec: AgentSpec, sandbox: Sandbox, pool: WorkspaceAgentPool, timing: AgentTiming, touched: () => void): AgentRuntime {
  const stop = new AbortController();
  const now = () => new Date(timing.clock.now()).toISOString();
  void (async () => {
    await timing.clock.sleep(timing.agentConnectMs, stop.signal);
    if (stop.signal.aborted) return;
    agent.status = "connected";
    agent.firstConnectedAt ??= now();
    agent.lastConnectedAt = now();
    agent.lifecycle = "starting";
    agent.startedAt = now();
    touched();
    for (const app of agent.apps) void watchApp(app, pool, timing, stop.signal, touched);
    if (!spec.startupScript) {
      agent.lifecycle = "ready";
      agent.readyAt = now();
      touched();
      return;
    }
    const outcome = await runStartupScript(spec, agent, sandbox, timing.clock, stop.signal);
    if (stop.signal.aborted) return;
    agent.lifecycle = outcome;
    if (outcome === "ready") agent.readyAt = now();
    touched();
  })().catch(() => {
    if (stop.signal.aborted) return;
    agent.lifecycle = "start_error";
    touched();
  });
  return { stop: () => stop.abort() };
}

async function runStartupScript(spec: AgentSpec, agent: AgentRecord, sandbox: Sandbox, clock: VendorClock, signal: AbortSignal): Promise<"ready" | "start_error" | "start_timeout"> {
  // Detached: what the script starts in the background (an app server) outlives it, as under the agent.
  const handle = await sandbox.exec({ script: spec.startupScript!, env: agent.env, cwd: agent.directory, detached: true, tag: "coder-startup-script" });
  const timeoutMs = (spec.startupScriptTimeoutSec ?? 0) * 1000;
  let cancelTimeout = () => {};
  const timedOut = timeoutMs > 0 ? new Promise<"start_timeout">((resolve) => (cancelTimeout = clock.after(timeoutMs, () => resolve("start_timeout")))) : undefined;
  const exited = handle.exited.then((exit) => (exit.exitCode === 0 ? "ready" : "start_error") as "ready" | "start_error");
  const aborted = new Promise<"start_error">((resolve) => signal.addEventListener("abort", () => resolve("start_error"), { once: true }));
  const outcome = await Promise.race([exited, aborted, ...(timedOut ? [timedOut] : [])]);
  cancelTimeout();
  handle.close();
  return outcome;
}

async function watchApp(app: AgentRecord["apps"][number], pool: WorkspaceAgentPool, timing: AgentTiming, signal: AbortSignal, touched: () => void): Promise<void> {
  const check = app.spec.healthcheck;
  if (!check?.url) {
    app.health = "disabled";
    touched();
    return;
  }
  // The agent starts no ticker for a check without a positive interval and threshold
  // (`shouldStartTicker`): the app stays `initializing`.
  if (!(check.interval > 0 && check.threshold > 0)) return;
  while (!signal.aborted) {
    let ok = false;
    try {
      // Any answer below 500 (after redirects) is healthy; the agent times a check out at its interval.
      const status = await probe(pool, check.url, Math.max(HEALTHCHECK_MIN_TIMEOUT_MS, check.interval * 1000 - 1));
      ok = status < 500;
    } catch {
      ok = false;
    }
    if (signal.aborted) return;
    if (ok) {
      app.failures = 0;
      if (app.health !== "healthy") {
        app.health = "healthy";
        touched();
      }
    } else if (app.failures < check.threshold) {
      // Counted up to the threshold, whatever the health; the failure after that makes it unhealthy.
      app.failures += 1;
    } else if (app.health !== "unhealthy") {
      app.health = "unhealthy";
      touched();
    }
    await timing.clock.sleep(app.health === "healthy" ? Math.max(timing.healthPollMs, check.interval * 1000) : timing.healthPollMs, signal);
  }
}
