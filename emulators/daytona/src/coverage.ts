import type { CoverageEntry, CoverageSpec } from "@paperclip-sandbox/emulator-kit";

const served = (reason?: string): CoverageEntry => ({ status: "served", ...(reason ? { reason } : {}) });
const refused = (reason: string): CoverageEntry => ({ status: "refused", reason });

const NO_NETWORK = "jails have no network and expose no port: preview, signed and SSH URLs would point nowhere";
const NO_BUILDS = "one image (the host's tree): nothing is built, so there are no build logs";
const NO_FORKS = "no copy-on-write sandbox copies (fork, backup); archive keeps a stopped sandbox's disk";
const NO_TELEMETRY = "no OpenTelemetry collector behind the emulator";
const RUNNER_ONLY = "called by Daytona's runners and proxy, not by clients";

/**
 * Every operation of `@daytona/toolbox-api-client` and `@daytona/api-client` 0.218.0 (the SDK's
 * generated clients), as this emulator answers it. Refused operations answer 501 with the reason
 * (toolbox: the daemon's error body; control plane: NestJS's) unless their group is refused whole.
 */
export const DAYTONA_COVERAGE: CoverageSpec = {
  operations: {
    // Toolbox: files.
    "toolbox/file-system.createFolder": served(),
    "toolbox/file-system.deleteFile": served(),
    "toolbox/file-system.downloadFile": served(),
    "toolbox/file-system.downloadFiles": served(),
    "toolbox/file-system.findInFiles": served(),
    "toolbox/file-system.getFileInfo": served("owner and group are numeric ids, as the daemon reports them"),
    "toolbox/file-system.listFiles": served(),
    "toolbox/file-system.moveFile": served(),
    "toolbox/file-system.replaceInFiles": served(),
    "toolbox/file-system.searchFiles": served(),
    "toolbox/file-system.setFilePermissions": served("chown to another user is EPERM (FILE_ACCESS_DENIED): the jail has one user"),
    "toolbox/file-system.uploadFile": served(),
    "toolbox/file-system.uploadFiles": served(),
    // Toolbox: processes and sessions.
    "toolbox/process.executeCommand": served(),
    "toolbox/process.codeRun": served("python3, node; no chart artifacts"),
    "toolbox/process.createSession": served(),
    "toolbox/process.getSession": served(),
    "toolbox/process.listSessions": served(),
    "toolbox/process.deleteSession": served(),
    "toolbox/process.sessionExecuteCommand": served("no shell state kept between a session's commands"),
    "toolbox/process.getSessionCommand": served(),
    "toolbox/process.getSessionCommandLogs": served("also as the follow=true WebSocket"),
    "toolbox/process.sendInput": served(),
    "toolbox/process.getEntrypointSession": served("404: these sandboxes have no image entrypoint"),
    "toolbox/process.getEntrypointLogs": served("404: these sandboxes have no image entrypoint"),
    "toolbox/process.createPtySession": served("<shell> -i -l on a real terminal in the jail; also create-connect (one WebSocket upgrade, envs in a subprotocol)"),
    "toolbox/process.connectPtySession": served("binary output frames to every client, connected/exited control messages, the exit in the close frame"),
    "toolbox/process.getPtySession": served(),
    "toolbox/process.listPtySessions": served(),
    "toolbox/process.resizePtySession": served("one window-size change (SIGWINCH), 1-999"),
    "toolbox/process.deletePtySession": served("SIGKILL to the terminal's process group; clients closed with 137"),
    // Toolbox: info, ports, daemon internals.
    "toolbox/info.getUserHomeDir": served(),
    "toolbox/info.getWorkDir": served(),
    "toolbox/info.getVersion": served(),
    "toolbox/port.getPorts": served(),
    "toolbox/port.isPortInUse": served(),
    "toolbox/server.initialize": refused(RUNNER_ONLY),
    "toolbox/server.updateEnv": refused(RUNNER_ONLY),
    "toolbox/system.getSystemMetrics": refused(NO_TELEMETRY),
    // Control plane: sandboxes.
    "api/sandbox.createSandbox": served("snapshot names or a Dockerfile are recorded, not built"),
    "api/sandbox.getSandbox": served(),
    "api/sandbox.listSandboxes": served("labels, states, limit and cursor; other filters are ignored"),
    "api/sandbox.startSandbox": served("also resumes a paused sandbox"),
    "api/sandbox.stopSandbox": served(),
    "api/sandbox.pauseSandbox": served("the jail is frozen: memory and processes kept"),
    "api/sandbox.archiveSandbox": served(),
    "api/sandbox.deleteSandbox": served(),
    "api/sandbox.recoverSandbox": served("only a sandbox in the error state"),
    "api/sandbox.resizeSandbox": served("new limits apply from the next boot"),
    "api/sandbox.replaceLabels": served(),
    "api/sandbox.setAutostopInterval": served(),
    "api/sandbox.setAutoPauseInterval": served(),
    "api/sandbox.setAutoArchiveInterval": served(),
    "api/sandbox.setAutoDeleteInterval": served(),
    "api/sandbox.setTtl": served(),
    "api/sandbox.updateLastActivity": served(),
    "api/sandbox.updatePublicStatus": served("recorded only"),
    "api/sandbox.getToolboxProxyUrl": served(),
    "api/sandbox.createBackup": refused(NO_FORKS),
    "api/sandbox.createSandboxSnapshot": served("a copy of the jail's writable trees (workspace, home, cache, /tmp), taken frozen; the image tree is the host's"),
    "api/sandbox.forkSandbox": refused(NO_FORKS),
    "api/sandbox.getSandboxAncestors": refused(NO_FORKS),
    "api/sandbox.getSandboxForks": refused(NO_FORKS),
    "api/sandbox.getSandboxParent": refused(NO_FORKS),
    "api/sandbox.getBuildLogs": refused(NO_BUILDS),
    "api/sandbox.getBuildLogsUrl": refused(NO_BUILDS),
    "api/sandbox.createSshAccess": refused(NO_NETWORK),
    "api/sandbox.revokeSshAccess": refused(NO_NETWORK),
    "api/sandbox.validateSshAccess": refused(NO_NETWORK),
    "api/sandbox.getPortPreviewUrl": refused(NO_NETWORK),
    "api/sandbox.getSignedPortPreviewUrl": refused(NO_NETWORK),
    "api/sandbox.expireSignedPortPreviewUrl": refused(NO_NETWORK),
    "api/sandbox.getSandboxSigningKey": refused(NO_NETWORK),
    "api/sandbox.rotateSigningKey": refused(NO_NETWORK),
    "api/sandbox.updateNetworkSettings": refused("jails have no network: allow lists and block-all are moot"),
    "api/sandbox.getSandboxLogs": refused(NO_TELEMETRY),
    "api/sandbox.getSandboxMetrics": refused(NO_TELEMETRY),
    "api/sandbox.getSandboxTraces": refused(NO_TELEMETRY),
    "api/sandbox.getSandboxTraceSpans": refused(NO_TELEMETRY),
    "api/sandbox.getOrganizationBySandboxId": refused("one organization per emulator; organizations are not an API here"),
    "api/sandbox.getRegionQuotaBySandboxId": refused("one region; the quota is the emulator's option"),
    "api/sandbox.resolveSandboxSecrets": refused("no secret store (env is passed at create)"),
    "api/sandbox.updateSandboxSecrets": refused("no secret store (env is passed at create)"),
    "api/sandbox.getSandboxesForRunner": refused(RUNNER_ONLY),
    "api/sandbox.updateSandboxState": refused(RUNNER_ONLY),
    // Control plane: the snapshot registry.
    "api/snapshots.createSnapshot": served("registered active at once: names only, nothing is built"),
    "api/snapshots.getAllSnapshots": served("page/limit, name (partial, any case), sourceSandboxId, sort/order as ListSnapshotsQuery"),
    "api/snapshots.getSnapshot": served("by id or name"),
    "api/snapshots.removeSnapshot": served("by id only (a name is 400, as the API's UUID pipe)"),
    "api/snapshots.activateSnapshot": served("by id only"),
    "api/snapshots.deactivateSnapshot": served("by id only; 204"),
    "api/snapshots.getSnapshotBuildLogs": refused(NO_BUILDS),
    "api/snapshots.getSnapshotBuildLogsUrl": refused(NO_BUILDS),
  },
  refusedGroups: {
    "toolbox/git": "jails have no network (clone, pull, push); local git is plain `git` through execute or sessions",
    "toolbox/lsp": "no language servers in the jails",
    "toolbox/interpreter": "no stateful interpreter contexts (code-run runs each snippet fresh)",
    "toolbox/computer-use": "no desktop (X server, screenshots, input)",
    "api/volumes": "no volumes: a sandbox's disk is its own",
    "api/api-keys": "account administration: one API key per emulator",
    "api/audit": "account administration is not emulated",
    "api/config": "account administration is not emulated",
    "api/docker-registry": "no image registry: one image",
    "api/health": "the emulator's liveness is its port",
    "api/jobs": RUNNER_ONLY,
    "api/object-storage": "no Image build contexts (object storage)",
    "api/organizations": "account administration: one organization per emulator",
    "api/preview": NO_NETWORK,
    "api/regions": "one region",
    "api/runners": RUNNER_ONLY,
    "api/secret": "no secret store (env is passed at create)",
    "api/users": "account administration is not emulated",
    "api/warm-pools": "no warm pools: a create starts its jail at once",
    "api/webhooks": "no webhooks: the Socket.IO gateway carries the events",
  },
};

/** Path prefixes of groups refused whole, answered 501 with the group's reason. */
export const REFUSED_PREFIXES: ReadonlyArray<{ plane: "toolbox" | "api"; prefix: string; group: string }> = [
  { plane: "toolbox", prefix: "git", group: "toolbox/git" },
  { plane: "toolbox", prefix: "lsp", group: "toolbox/lsp" },
  { plane: "toolbox", prefix: "process/interpreter", group: "toolbox/interpreter" },
  { plane: "toolbox", prefix: "computeruse", group: "toolbox/computer-use" },
  { plane: "api", prefix: "volumes", group: "api/volumes" },
];
