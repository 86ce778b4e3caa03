import { HttpError, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import type { CoverageEntry, CoverageSpec } from "@paperclip-sandbox/emulator-kit";

const served = (reason?: string): CoverageEntry => ({ status: "served", ...(reason ? { reason } : {}) });
const refused = (reason: string): CoverageEntry => ({ status: "refused", reason });

const NO_SNAPSHOTS = "no sandbox forks (memory and filesystem copies); pause/resume and filesystem snapshots are served";
const SNAPSHOTS = "a snapshot is a template holding a copy of the sandbox's writable trees (workspace, home, cache, /tmp), taken frozen; memory is not kept";
const NO_TEMPLATES = "templates are names (the `templates` option): nothing is built or administered";
const NO_METRICS = "no resource metrics";
const NO_WATCH = "no filesystem watchers (no inotify bridge into the jails)";

/**
 * Every operation of the e2b SDK's (2.51.0) and Novita's fork's (2.1.1) generated control-plane
 * and envd REST clients (`paths` of their openapi typings) and of the `process.Process` and
 * `filesystem.Filesystem` Connect services (the descriptors the SDKs bundle). Refused operations
 * answer 501 `{code: 501, message: "emulator limit: <reason>"}` (REST) or Connect `unimplemented`.
 */
export const ENVD_COVERAGE: CoverageSpec = {
  operations: {
    "api.GET /sandboxes": served("running sandboxes (deprecated listing)"),
    "api.POST /sandboxes": served("Novita's v1 create (secure: an access token)"),
    "api.GET /sandboxes/{sandboxID}": served(),
    "api.DELETE /sandboxes/{sandboxID}": served(),
    "api.POST /sandboxes/{sandboxID}/connect": served("Novita's v1 connect"),
    "api.POST /sandboxes/{sandboxID}/pause": served("the jail is frozen: memory and processes kept"),
    "api.POST /sandboxes/{sandboxID}/resume": served("a paused sandbox only (409 when running)"),
    "api.POST /sandboxes/{sandboxID}/refreshes": served("extends, never shortens"),
    "api.POST /sandboxes/{sandboxID}/timeout": served(),
    "api.GET /v2/sandboxes": served("metadata filter, state, X-Next-Token paging"),
    "api.POST /v2/sandboxes": served(),
    "api.POST /v2/sandboxes/{sandboxID}/connect": served("resumes a paused sandbox (201)"),
    "api.POST /sandboxes/{sandboxID}/fork": refused(NO_SNAPSHOTS),
    "api.POST /sandboxes/{sandboxID}/snapshots": served(`${SNAPSHOTS}; a name as E2B parses it ([team/]alias[:tag]); a tag other than default is 501`),
    "api.GET /snapshots": served("filters sandboxID and name; newest first, cursor pages (nextToken in, X-Next-Token out)"),
    "api.GET /sandboxes/{sandboxID}/logs": refused("no sandbox logs are kept (command output goes to its stream)"),
    "api.GET /v2/sandboxes/{sandboxID}/logs": refused("no sandbox logs are kept (command output goes to its stream)"),
    "api.GET /sandboxes/{sandboxID}/metrics": refused(NO_METRICS),
    "api.GET /sandboxes/metrics": refused(NO_METRICS),
    "api.GET /teams/{teamID}/metrics": refused(NO_METRICS),
    "api.GET /teams/{teamID}/metrics/max": refused(NO_METRICS),
    "api.PUT /sandboxes/{sandboxID}/network": refused("jails have no network: egress rules are moot"),
    "api.GET /teams": refused("account administration: one team per emulator"),
    "api.GET /secrets": refused("no secret store (envVars are passed at create)"),
    "api.POST /secrets": refused("no secret store (envVars are passed at create)"),
    "api.GET /secrets/{secretID}": refused("no secret store (envVars are passed at create)"),
    "api.POST /secrets/{secretID}": refused("no secret store (envVars are passed at create)"),
    "api.DELETE /secrets/{secretID}": refused("no secret store (envVars are passed at create)"),
    "api.GET /volumes": refused("no volumes: a sandbox's disk is its own"),
    "api.POST /volumes": refused("no volumes: a sandbox's disk is its own"),
    "api.GET /volumes/{volumeID}": refused("no volumes: a sandbox's disk is its own"),
    "api.DELETE /volumes/{volumeID}": refused("no volumes: a sandbox's disk is its own"),
    "api.GET /templates": refused(NO_TEMPLATES),
    "api.GET /templates/{templateID}": refused(NO_TEMPLATES),
    "api.DELETE /templates/{templateID}": served("snapshot templates only; named templates (the `templates` option) are not administered"),
    "api.PATCH /templates/{templateID}": refused(NO_TEMPLATES),
    "api.POST /templates/{templateID}/builds/{buildID}": refused(NO_TEMPLATES),
    "api.GET /templates/{templateID}/builds/{buildID}/logs": refused(NO_TEMPLATES),
    "api.GET /templates/{templateID}/builds/{buildID}/status": refused(NO_TEMPLATES),
    "api.GET /templates/{templateID}/files/{hash}": refused(NO_TEMPLATES),
    "api.GET /templates/{templateID}/tags": refused(NO_TEMPLATES),
    "api.GET /templates/aliases/{alias}": served("snapshot templates' aliases and the `templates` option's names"),
    "api.POST /templates/tags": refused(NO_TEMPLATES),
    "api.DELETE /templates/tags": refused(NO_TEMPLATES),
    "api.POST /templates": refused(NO_TEMPLATES),
    "api.POST /templates/{templateID}": refused(NO_TEMPLATES),
    "api.POST /v2/templates": refused(NO_TEMPLATES),
    "api.GET /v2/templates": refused(NO_TEMPLATES),
    "api.PATCH /v2/templates/{templateID}": refused(NO_TEMPLATES),
    "api.POST /v2/templates/{templateID}/builds/{buildID}": refused(NO_TEMPLATES),
    "api.POST /v3/templates": refused(NO_TEMPLATES),
    "envd.GET /files": served(),
    "envd.POST /files": served("multipart or octet-stream (gzip too)"),
    "envd.POST /files/compose": refused("no file composition (single uploads are served)"),
    "envd.GET /health": served(),
    "envd.GET /envs": served(),
    "envd.GET /metrics": refused(NO_METRICS),
    "process.Process.Start": served("with `pty`: a real terminal in the jail (util-linux `script`); output as `pty` data"),
    "process.Process.Connect": served(),
    "process.Process.List": served(),
    "process.Process.SendInput": served("stdin, or `pty` bytes to a PTY process"),
    "process.Process.CloseStdin": served("refused for a PTY process, as envd does"),
    "process.Process.SendSignal": served("a PTY process: the program on the terminal"),
    "process.Process.Update": served("PTY resize (SIGWINCH reaches the program)"),
    "process.Process.StreamInput": served("start, then data written as it arrives (stdin or `pty`), keepalives; answered at the end of the stream"),
    "filesystem.Filesystem.Stat": served(),
    "filesystem.Filesystem.ListDir": served(),
    "filesystem.Filesystem.MakeDir": served(),
    "filesystem.Filesystem.Move": served(),
    "filesystem.Filesystem.Remove": served(),
    "filesystem.Filesystem.WatchDir": refused(NO_WATCH),
    "filesystem.Filesystem.CreateWatcher": refused(NO_WATCH),
    "filesystem.Filesystem.GetWatcherEvents": refused(NO_WATCH),
    "filesystem.Filesystem.RemoveWatcher": refused(NO_WATCH),
  },
};

/**
 * Routes for the refused REST operations (501 in E2B's `{code, message}` body, after the API key).
 */
export function refusalRoutes(router: Router, auth: (ctx: HttpContext) => void): void {
  for (const [key, entry] of Object.entries(ENVD_COVERAGE.operations)) {
    if (entry.status !== "refused" || (!key.startsWith("api.") && !key.startsWith("envd."))) continue;
    const [method, template] = key.slice(key.indexOf(".") + 1).split(" ") as [string, string];
    const path = template.replace(/\{(\w+)\}/g, ":$1");
    router.route(method, path, (ctx) => {
      if (key.startsWith("api.")) auth(ctx);
      ctx.record.markUnserved("refused");
      throw new HttpError(501, `emulator limit: ${entry.reason}`);
    });
  }
}
