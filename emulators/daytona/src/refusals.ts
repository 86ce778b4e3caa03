import { HttpError, type ErrorEnvelope, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { DAYTONA_COVERAGE, REFUSED_PREFIXES } from "./coverage.js";

export interface RefusalDeps {
  authorize(ctx: Pick<HttpContext, "header" | "query">): void;
  apiEnvelope: ErrorEnvelope;
  daemonEnvelope: ErrorEnvelope;
}

/** Routes of individually refused operations (method, path under the plane's root, coverage key). */
const REFUSED_ROUTES: ReadonlyArray<[string, string, string]> = [
  ["POST", "/toolbox/:sandboxId/init", "toolbox/server.initialize"],
  ["POST", "/toolbox/:sandboxId/env", "toolbox/server.updateEnv"],
  ["GET", "/toolbox/:sandboxId/system/metrics", "toolbox/system.getSystemMetrics"],
  ["POST", "/api/sandbox/:id/backup", "api/sandbox.createBackup"],
  ["POST", "/api/sandbox/:id/fork", "api/sandbox.forkSandbox"],
  ["GET", "/api/sandbox/:id/ancestors", "api/sandbox.getSandboxAncestors"],
  ["GET", "/api/sandbox/:id/forks", "api/sandbox.getSandboxForks"],
  ["GET", "/api/sandbox/:id/parent", "api/sandbox.getSandboxParent"],
  ["GET", "/api/sandbox/:id/build-logs", "api/sandbox.getBuildLogs"],
  ["GET", "/api/sandbox/:id/build-logs-url", "api/sandbox.getBuildLogsUrl"],
  ["POST", "/api/sandbox/:id/ssh-access", "api/sandbox.createSshAccess"],
  ["DELETE", "/api/sandbox/:id/ssh-access", "api/sandbox.revokeSshAccess"],
  ["GET", "/api/sandbox/ssh-access/validate", "api/sandbox.validateSshAccess"],
  ["GET", "/api/sandbox/:id/ports/:port/preview-url", "api/sandbox.getPortPreviewUrl"],
  ["GET", "/api/sandbox/:id/ports/:port/signed-preview-url", "api/sandbox.getSignedPortPreviewUrl"],
  ["POST", "/api/sandbox/:id/ports/:port/signed-preview-url/:token/expire", "api/sandbox.expireSignedPortPreviewUrl"],
  ["GET", "/api/sandbox/:id/signing-key", "api/sandbox.getSandboxSigningKey"],
  ["POST", "/api/sandbox/:id/signing-key/rotate", "api/sandbox.rotateSigningKey"],
  ["POST", "/api/sandbox/:id/network-settings", "api/sandbox.updateNetworkSettings"],
  ["GET", "/api/sandbox/:id/telemetry/logs", "api/sandbox.getSandboxLogs"],
  ["GET", "/api/sandbox/:id/telemetry/metrics", "api/sandbox.getSandboxMetrics"],
  ["GET", "/api/sandbox/:id/telemetry/traces", "api/sandbox.getSandboxTraces"],
  ["GET", "/api/sandbox/:id/telemetry/traces/:traceId", "api/sandbox.getSandboxTraceSpans"],
  ["GET", "/api/sandbox/:id/organization", "api/sandbox.getOrganizationBySandboxId"],
  ["GET", "/api/sandbox/:id/region-quota", "api/sandbox.getRegionQuotaBySandboxId"],
  ["GET", "/api/sandbox/:id/secrets", "api/sandbox.resolveSandboxSecrets"],
  ["PUT", "/api/sandbox/:id/secrets", "api/sandbox.updateSandboxSecrets"],
  ["GET", "/api/sandbox/for-runner", "api/sandbox.getSandboxesForRunner"],
  ["PUT", "/api/sandbox/:id/state", "api/sandbox.updateSandboxState"],
  ["GET", "/api/snapshots/:id/build-logs", "api/snapshots.getSnapshotBuildLogs"],
  ["GET", "/api/snapshots/:id/build-logs-url", "api/snapshots.getSnapshotBuildLogsUrl"],
];

/**
 * What the emulator refuses on purpose answers 501 with the reason from its coverage table, in the
 * plane's error body (after authentication, as the real routes check the key first). These routes
 * are registered before the served ones they could shadow (`/api/sandbox/for-runner`).
 */
export function registerRefusals(router: Router, deps: RefusalDeps): void {
  const refuse = (reason: string) => (ctx: HttpContext) => {
    deps.authorize(ctx);
    ctx.record.markUnserved("refused");
    throw new HttpError(501, `emulator limit: ${reason}`, { code: "NOT_IMPLEMENTED" });
  };
  for (const [method, path, op] of REFUSED_ROUTES) {
    const reason = DAYTONA_COVERAGE.operations[op]?.reason ?? "not emulated";
    const envelope = path.startsWith("/toolbox/") ? deps.daemonEnvelope : deps.apiEnvelope;
    router.route(method, path, refuse(reason), { errorEnvelope: envelope });
  }
  for (const { plane, prefix, group } of REFUSED_PREFIXES) {
    const reason = DAYTONA_COVERAGE.refusedGroups?.[group] ?? "not emulated";
    const base = plane === "toolbox" ? `/toolbox/:sandboxId/${prefix}` : `/api/${prefix}`;
    const envelope = plane === "toolbox" ? deps.daemonEnvelope : deps.apiEnvelope;
    router.route("*", base, refuse(reason), { errorEnvelope: envelope });
    router.route("*", `${base}/*rest`, refuse(reason), { errorEnvelope: envelope });
  }
}
