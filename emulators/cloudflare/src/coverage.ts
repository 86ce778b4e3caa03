import type { CoverageEntry, CoverageSpec } from "@paperclip-sandbox/emulator-kit";

const served = (reason?: string): CoverageEntry => ({ status: "served", ...(reason ? { reason } : {}) });
const refused = (reason: string): CoverageEntry => ({ status: "refused", reason });

const NOT_CALLED = "the bridge never calls it (404, recorded as unserved)";

/**
 * Every method of `@cloudflare/sandbox` 0.7.21's container clients (what the Durable Object sends
 * the container), as the stand-in container answers it. Refused ones answer the router's 404 in the
 * container's error shape and are recorded as unserved.
 */
export const CLOUDFLARE_COVERAGE: CoverageSpec = {
  operations: {
    "commands.execute": served("a non-streamed command that outlives its timeout keeps running and keeps its session busy, as 0.7.x's does"),
    "commands.executeStream": served("`data:` frames per line, NULs dropped, the log read every 100 ms; no timeout, as 0.7.x"),
    "files.writeFile": served("base64 or UTF-8 content"),
    "files.readFile": served("binary classed by extension, then a NUL/UTF-8 sniff (the container asks Bun and `file`)"),
    "files.readFileStream": served("65,535-byte chunks"),
    "files.deleteFile": served(),
    "files.mkdir": served(),
    "files.exists": served(),
    "files.renameFile": refused(NOT_CALLED),
    "files.moveFile": refused(NOT_CALLED),
    "files.listFiles": refused(NOT_CALLED),
    "utils.ping": served(),
    "utils.getVersion": served("reports 0.7.21"),
    "utils.createSession": served(),
    "utils.deleteSession": served("signals only streamed commands, as 0.7.x's does"),
    "utils.getCommands": refused(NOT_CALLED),
    "desktop.stop": served("a no-op: there is no desktop (destroy() calls it first)"),
  },
  refusedGroups: {
    backup: NOT_CALLED,
    desktop: "no desktop in a jail",
    git: NOT_CALLED,
    interpreter: "no code interpreter in a jail",
    ports: "jails expose no ports (no preview URLs)",
    processes: "background processes are not used: the bridge builds its streamed processes on executeStream",
    watch: NOT_CALLED,
  },
};
