import { ConnectError, connectServerStream, connectUnary, type Router } from "@paperclip-sandbox/emulator-kit";
import { SandboxFileError } from "@paperclip-sandbox/sandbox-backend";
import { entryInfo } from "./entry-info.js";
import { checkUser, envdTarget, resolveSandboxPath, userFromAuthorization } from "./envd-access.js";
import type { SandboxRegistry } from "./sandboxes.js";

const MAX_LIST_DEPTH = 16;

/**
 * `filesystem.Filesystem` (unary methods, JSON codec): Stat, ListDir, MakeDir, Move, Remove, each as
 * the sandbox user inside the jail. Watchers are not emulated.
 */
export function filesystemRoutes(router: Router, sandboxes: SandboxRegistry): void {
  const target = (call: Parameters<Parameters<typeof connectUnary>[2]>[1]) => {
    const found = envdTarget(call.ctx, sandboxes);
    checkUser(userFromAuthorization(call.header("authorization")));
    return found;
  };

  connectUnary<{ path?: string }, object>(router, "/filesystem.Filesystem/Stat", async (request, call) => {
    const { sandbox, dialect } = target(call);
    const path = connectPath(request.path);
    const info = await sandbox.jail.files.stat(path).catch(fileError(path));
    return { entry: entryInfo(info, dialect) };
  });

  connectUnary<{ path?: string; depth?: number }, object>(router, "/filesystem.Filesystem/ListDir", async (request, call) => {
    const { sandbox, dialect } = target(call);
    const path = connectPath(request.path);
    const depth = request.depth === undefined || request.depth === null ? 1 : Number(request.depth);
    if (!Number.isInteger(depth) || depth < 1 || depth > MAX_LIST_DEPTH) throw new ConnectError("invalid_argument", `depth: must be 1..${MAX_LIST_DEPTH}`);
    const info = await sandbox.jail.files.stat(path, { follow: true }).catch(fileError(path));
    if (info.type !== "directory") throw new ConnectError("invalid_argument", `path '${path}' is not a directory`);
    const entries = await sandbox.jail.files.list(path, { depth }).catch(fileError(path));
    return { entries: entries.map((entry) => entryInfo(entry, dialect)) };
  });

  connectUnary<{ path?: string }, object>(router, "/filesystem.Filesystem/MakeDir", async (request, call) => {
    const { sandbox, dialect } = target(call);
    const path = connectPath(request.path);
    const { created } = await sandbox.jail.files.mkdir(path, { parents: true }).catch(fileError(path));
    if (!created) throw new ConnectError("already_exists", `directory '${path}' already exists`);
    return { entry: entryInfo(await sandbox.jail.files.stat(path).catch(fileError(path)), dialect) };
  });

  connectUnary<{ source?: string; destination?: string }, object>(router, "/filesystem.Filesystem/Move", async (request, call) => {
    const { sandbox, dialect } = target(call);
    const source = connectPath(request.source, "source");
    const destination = connectPath(request.destination, "destination");
    const info = await sandbox.jail.files.move(source, destination, { overwrite: true }).catch(fileError(source));
    return { entry: entryInfo(info, dialect) };
  });

  connectUnary<{ path?: string }, object>(router, "/filesystem.Filesystem/Remove", async (request, call) => {
    const { sandbox } = target(call);
    const path = connectPath(request.path);
    await sandbox.jail.files.remove(path, { recursive: true }).catch(fileError(path));
    return {};
  });

  // WatchDir is a server stream; the other three are unary.
  connectServerStream<object, object>(router, "/filesystem.Filesystem/WatchDir", () => {
    throw new ConnectError("unimplemented", "emulator limit: filesystem watchers are not emulated (no inotify bridge into the jails)");
  });
  for (const method of ["CreateWatcher", "GetWatcherEvents", "RemoveWatcher"]) {
    connectUnary<object, object>(router, `/filesystem.Filesystem/${method}`, () => {
      throw new ConnectError("unimplemented", "emulator limit: filesystem watchers are not emulated (no inotify bridge into the jails)");
    });
  }
}

function connectPath(raw: string | undefined, what = "path"): string {
  try {
    return resolveSandboxPath(raw, what);
  } catch (error) {
    throw new ConnectError("invalid_argument", (error as Error).message);
  }
}

/** Backend errno codes as envd's Connect codes. */
function fileError(path: string) {
  return (error: unknown): never => {
    if (error instanceof SandboxFileError) {
      switch (error.code) {
        case "ENOENT":
          throw new ConnectError("not_found", `path '${path}' does not exist`);
        case "EEXIST":
          throw new ConnectError("already_exists", `path '${path}' already exists`);
        case "EACCES":
        case "EPERM":
        case "EROFS":
          throw new ConnectError("permission_denied", `permission denied: '${path}'`);
        case "ENOTDIR":
        case "EISDIR":
        case "ENOTEMPTY":
        case "EINVAL":
          throw new ConnectError("invalid_argument", `${error.code}: '${path}'`);
        case "ENOSPC":
          throw new ConnectError("resource_exhausted", "not enough disk space");
      }
    }
    throw error;
  };
}
