import { randomBytes } from "node:crypto";
import { posix } from "node:path";
import type { Readable } from "node:stream";
import { HttpError, multipartBoundary, parseMultipart, queryBool, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import type { FileInfo, Sandbox as Jail } from "@paperclip-sandbox/sandbox-backend";
import { daemonErrorEnvelope, daemonFileError } from "./errors.js";
import type { Fleet } from "./fleet.js";
import { sandboxPath, toolboxTarget, whileActive, WORK_DIR } from "./toolbox.js";

export interface FileDeps {
  fleet: Fleet;
  authorize(ctx: HttpContext): void;
}

const opts = { errorEnvelope: daemonErrorEnvelope };
const PART_PATH = /^files\[(\d+)\]\.path$/;
const PART_FILE = /^files\[(\d+)\]\.file$/;

/** Files searched or grepped per request, at most (the daemon walks without a bound). */
const MAX_WALK_ENTRIES = 100_000;
/** find-in-files reads text files up to this size. */
const MAX_GREP_BYTES = 16 * 1024 * 1024;

/**
 * The daemon's file API (`FileSystemApi` of `@daytona/toolbox-api-client`): bulk upload (multipart
 * `files[i].path` + `files[i].file` pairs; parents created) and bulk download (a multipart answer
 * with one part per path whose `filename` is the path asked for, or an `error` part), single-file
 * upload and download, list, info, folder, delete, move, permissions, find in files, search by glob,
 * replace in files, and the directory lookups. Relative paths are the work dir's, as the daemon's
 * (its process cwd). Every operation runs in the jail as its user.
 */
export function registerFileRoutes(router: Router, deps: FileDeps): void {
  const target = (ctx: HttpContext) => {
    deps.authorize(ctx);
    return toolboxTarget(deps.fleet, ctx);
  };
  const required = (ctx: HttpContext, name: string, message = `${name} is required`) => {
    const value = ctx.query.get(name);
    if (!value) throw new HttpError(400, message, { code: "BAD_REQUEST" });
    return sandboxPath(value, name);
  };
  const files = (handler: (ctx: HttpContext, jail: Jail) => Promise<unknown>) => async (ctx: HttpContext) => {
    const { record, jail } = target(ctx);
    return whileActive(deps.fleet, record, () => handler(ctx, jail));
  };

  // GET /files (gin serves the group root as /files/ and redirects /files there).
  const list = files(async (ctx, jail) => {
    const dir = sandboxPath(ctx.query.get("path") || ".", "path");
    const entries = await jail.files.list(dir, { depth: 1 }).catch((error: unknown) => {
      throw fileError(error, dir, "plain");
    });
    return entries.map(fileInfoDto);
  });
  router.get("/toolbox/:sandboxId/files", list, opts);
  router.get("/toolbox/:sandboxId/files/", list, opts);

  router.get(
    "/toolbox/:sandboxId/files/info",
    files(async (ctx, jail) => {
      const path = required(ctx, "path");
      return fileInfoDto(
        await jail.files.stat(path, { follow: true }).catch((error: unknown) => {
          throw fileError(error, path, "plain");
        }),
      );
    }),
    opts,
  );

  router.post(
    "/toolbox/:sandboxId/files/folder",
    files(async (ctx, jail) => {
      const path = required(ctx, "path");
      const modeText = ctx.query.get("mode");
      const mode = modeText ? Number.parseInt(modeText, 8) : 0o755;
      if (!Number.isInteger(mode) || !/^[0-7]{1,4}$/.test(modeText ?? "755")) throw new HttpError(400, "invalid mode format", { code: "BAD_REQUEST" });
      await jail.files.mkdir(path, { parents: true, mode }).catch((error: unknown) => {
        throw fileError(error, path, "plain");
      });
      ctx.send(201);
    }),
    opts,
  );

  const remove = files(async (ctx, jail) => {
    const path = required(ctx, "path");
    const recursive = queryBool(ctx.query, "recursive") === true;
    const info = await jail.files.stat(path).catch((error: unknown) => {
      throw fileError(error, path, "coded");
    });
    if (info.type === "directory" && !recursive) throw new HttpError(400, "cannot delete directory without recursive flag", { code: "BAD_REQUEST" });
    await jail.files.remove(path, { recursive }).catch((error: unknown) => {
      throw fileError(error, path, "coded");
    });
    ctx.send(204);
  });
  router.delete("/toolbox/:sandboxId/files", remove, opts);
  router.delete("/toolbox/:sandboxId/files/", remove, opts);

  router.post(
    "/toolbox/:sandboxId/files/move",
    files(async (ctx, jail) => {
      const source = required(ctx, "source", "source and destination paths are required");
      const destination = required(ctx, "destination", "source and destination paths are required");
      await jail.files.move(source, destination, { overwrite: true }).catch((error: unknown) => {
        throw fileError(error, source, "coded");
      });
      ctx.send(200);
    }),
    opts,
  );

  router.post(
    "/toolbox/:sandboxId/files/permissions",
    files(async (ctx, jail) => {
      const path = required(ctx, "path");
      await jail.files.stat(path, { follow: true }).catch((error: unknown) => {
        throw fileError(error, path, "coded");
      });
      const mode = ctx.query.get("mode");
      const owner = ctx.query.get("owner");
      const group = ctx.query.get("group");
      if (mode && !/^[0-7]{1,4}$/.test(mode)) throw new HttpError(400, "invalid mode format", { code: "BAD_REQUEST" });
      for (const [field, value] of [
        ["owner", owner],
        ["group", group],
      ] as const) {
        if (value && !/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$/.test(value)) throw new HttpError(400, `${field === "owner" ? "user" : "group"} not found`, { code: "BAD_REQUEST" });
      }
      // chmod/chown(2) as the jail's user: another owner is EPERM, as for a daemon without root.
      const steps = [...(mode ? [`chmod ${mode} "$P" 2>&1 || exit 1`] : []), ...(owner || group ? [`chown ${owner ?? ""}${group ? `:${group}` : ""} "$P" 2>&1 || exit 1`] : [])];
      if (steps.length === 0) return ctx.send(200);
      let output = "";
      const exit = await jail.runner.run(steps.join("\n"), { env: { P: path }, stdout: (chunk: Buffer) => (output += chunk), stderr: (chunk: Buffer) => (output += chunk) });
      if (exit.exitCode !== 0) {
        // EPERM, or EINVAL for an id the jail's user namespace does not map (root): either way not allowed.
        const denied = /not permitted|denied|invalid argument/i.test(output);
        const unknown = /invalid (user|group)/i.exec(output);
        if (unknown) throw new HttpError(400, `${unknown[1]} not found`, { code: "BAD_REQUEST" });
        throw new HttpError(denied ? 403 : 400, `failed to change ${owner || group ? "ownership" : "mode"} for ${path}: ${output.trim().split("\n").pop() ?? ""}`, {
          code: denied ? "FILE_ACCESS_DENIED" : "BAD_REQUEST",
        });
      }
      ctx.send(200);
    }),
    opts,
  );

  router.get(
    "/toolbox/:sandboxId/files/download",
    files(async (ctx, jail) => {
      const path = required(ctx, "path");
      const info = await jail.files.stat(path, { follow: true }).catch((error: unknown) => {
        throw fileError(error, path, "coded");
      });
      if (info.type === "directory") throw new HttpError(400, `path is a directory: ${path}`, { code: "BAD_REQUEST" });
      const stream = await jail.files.readStream(path).catch((error: unknown) => {
        throw fileError(error, path, "coded");
      });
      ctx.res.writeHead(200, { "content-type": "application/octet-stream", "content-length": info.size, "content-disposition": `attachment; filename=${posix.basename(path)}` });
      for await (const chunk of stream) await write(ctx, chunk as Buffer);
      ctx.res.end();
    }),
    opts,
  );

  const uploadOne = files(async (ctx, jail) => {
    const path = required(ctx, "path");
    const boundary = multipartBoundary(ctx.header("content-type"));
    if (!boundary) throw new HttpError(400, "content-type: must be multipart/form-data with a boundary", { code: "INVALID_REQUEST_BODY" });
    let written = false;
    for await (const part of parseMultipart(ctx.body(), boundary, { maxPartBytes: 4 * 1024 * 1024 * 1024, maxTotalBytes: 4 * 1024 * 1024 * 1024 })) {
      if (part.name !== "file" || written) {
        part.body.resume();
        continue;
      }
      await jail.files.write(path, part.body).catch((error: unknown) => {
        throw fileError(error, path, "coded");
      });
      written = true;
    }
    if (!written) throw new HttpError(400, "file is required", { code: "BAD_REQUEST" });
    ctx.send(200);
  });
  router.post("/toolbox/:sandboxId/files/upload", uploadOne, opts);
  router.post("/toolbox/:sandboxId/files/upload-v2", uploadOne, opts);

  router.get(
    "/toolbox/:sandboxId/files/find",
    files(async (ctx, jail) => {
      const path = ctx.query.get("path");
      const pattern = ctx.query.get("pattern");
      if (!path || !pattern) throw new HttpError(400, "path and pattern are required", { code: "BAD_REQUEST" });
      const root = sandboxPath(path);
      const matches: Array<{ file: string; line: number; content: string }> = [];
      for (const entry of await walk(jail, root)) {
        if (entry.type !== "file" || entry.size > MAX_GREP_BYTES) continue;
        const bytes = await jail.files.read(entry.path, { maxBytes: MAX_GREP_BYTES }).catch(() => undefined);
        if (!bytes || bytes.subarray(0, 512).includes(0)) continue; // binary files are skipped
        bytes
          .toString("utf8")
          .split("\n")
          .forEach((text, index) => {
            if (text.includes(pattern)) matches.push({ file: entry.path, line: index + 1, content: text.replace(/\r$/, "") });
          });
      }
      return matches;
    }),
    opts,
  );

  router.get(
    "/toolbox/:sandboxId/files/search",
    files(async (ctx, jail) => {
      const path = ctx.query.get("path");
      const pattern = ctx.query.get("pattern");
      if (!path || !pattern) throw new HttpError(400, "path and pattern are required", { code: "BAD_REQUEST" });
      const root = sandboxPath(path);
      const glob = globRegExp(pattern);
      const found = (await walk(jail, root)).filter((entry) => entry.type !== "directory").filter((entry) => glob.test(posix.relative(root, entry.path)) || glob.test(entry.name));
      return { files: found.map((entry) => entry.path) };
    }),
    opts,
  );

  router.post(
    "/toolbox/:sandboxId/files/replace",
    files(async (ctx, jail) => {
      const body = await ctx.readJson<{ files?: unknown; pattern?: unknown; newValue?: unknown }>();
      if (!body || !Array.isArray(body.files) || typeof body.pattern !== "string" || typeof body.newValue !== "string" || body.files.some((f) => typeof f !== "string")) {
        throw new HttpError(400, "invalid request body: files, pattern and newValue are required", { code: "BAD_REQUEST" });
      }
      const results: Array<{ file: string; success: boolean; error?: string }> = [];
      for (const file of body.files as string[]) {
        try {
          const path = sandboxPath(file);
          const text = (await jail.files.read(path, { maxBytes: MAX_GREP_BYTES })).toString("utf8");
          await jail.files.write(path, text.split(body.pattern).join(body.newValue), { mode: 0o644 });
          results.push({ file, success: true });
        } catch (error) {
          results.push({ file, success: false, error: `open ${file}: ${(error as { code?: string }).code === "ENOENT" ? "no such file or directory" : (error as Error).message}` });
        }
      }
      return results;
    }),
    opts,
  );

  router.get("/toolbox/:sandboxId/user-home-dir", (ctx) => (deps.authorize(ctx), toolboxTarget(deps.fleet, ctx), { dir: WORK_DIR }), opts);
  router.get("/toolbox/:sandboxId/work-dir", (ctx) => (deps.authorize(ctx), toolboxTarget(deps.fleet, ctx), { dir: WORK_DIR }), opts);
  router.get("/toolbox/:sandboxId/version", (ctx) => (deps.authorize(ctx), toolboxTarget(deps.fleet, ctx), { version: "emulator" }), opts);

  router.post(
    "/toolbox/:sandboxId/files/bulk-upload",
    async (ctx) => {
      deps.authorize(ctx);
      const { record, jail } = toolboxTarget(deps.fleet, ctx);
      const boundary = multipartBoundary(ctx.header("content-type"));
      if (!boundary) throw new HttpError(400, "content-type: must be multipart/form-data with a boundary", { code: "INVALID_REQUEST_BODY" });
      const written = await whileActive(deps.fleet, record, async () => {
        const paths = new Map<string, string>();
        const files: Array<{ path: string; bytes: number }> = [];
        for await (const part of parseMultipart(ctx.body(), boundary, { maxPartBytes: 4 * 1024 * 1024 * 1024, maxTotalBytes: 8 * 1024 * 1024 * 1024 })) {
          const pathPart = PART_PATH.exec(part.name);
          const filePart = PART_FILE.exec(part.name);
          if (pathPart) paths.set(pathPart[1]!, sandboxPath((await part.text()).trim(), part.name));
          else if (filePart) {
            const target = paths.get(filePart[1]!);
            if (!target) throw new HttpError(400, `${part.name}: no files[${filePart[1]}].path before it`, { code: "INVALID_REQUEST_BODY" });
            const info = await jail.files.write(target, part.body).catch((error: unknown) => {
              throw fileError(error, target);
            });
            files.push({ path: target, bytes: info.size });
          }
        }
        return files;
      });
      return { files: written };
    },
    opts,
  );

  router.post(
    "/toolbox/:sandboxId/files/bulk-download",
    async (ctx) => {
      deps.authorize(ctx);
      const { record, jail } = toolboxTarget(deps.fleet, ctx);
      const body = await ctx.readJson<{ paths?: unknown }>();
      const paths = body?.paths;
      if (!Array.isArray(paths) || paths.length === 0 || paths.some((p) => typeof p !== "string")) {
        throw new HttpError(400, "paths: must be a non-empty list of paths", { code: "INVALID_REQUEST_BODY" });
      }
      const boundary = `DAYTONA-FILE-BOUNDARY-${randomBytes(8).toString("hex")}`;
      await whileActive(deps.fleet, record, async () => {
        ctx.res.writeHead(200, { "content-type": `multipart/form-data; boundary=${boundary}` });
        for (const asked of paths as string[]) {
          const disposition = (name: string) => `Content-Disposition: form-data; name="${name}"; filename="${asked.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
          let stream: Readable | undefined;
          let size = 0;
          try {
            const target = sandboxPath(asked);
            const info = await jail.files.stat(target, { follow: true });
            if (info.type === "directory") throw Object.assign(new Error(`is a directory: ${asked}`), { code: "EISDIR" });
            size = info.size;
            stream = await jail.files.readStream(target);
          } catch (error) {
            const problem = fileError(error, asked);
            const json = JSON.stringify(daemonErrorEnvelope({ status: problem.status, message: problem.message, code: problem.code ?? "FILE_READ_FAILED" }));
            await write(ctx, `--${boundary}\r\n${disposition("error")}\r\nContent-Type: application/json; charset=utf-8\r\n\r\n${json}\r\n`);
            continue;
          }
          await write(ctx, `--${boundary}\r\n${disposition("file")}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`);
          for await (const chunk of stream) await write(ctx, chunk as Buffer);
          await write(ctx, "\r\n");
        }
        await write(ctx, `--${boundary}--\r\n`);
        ctx.res.end();
      });
    },
    opts,
  );
}

/**
 * A backend file error as the daemon's answer (never a 500 for a missing file): `coded` handlers
 * raise DaemonErrors (FILE_NOT_FOUND, FILE_ACCESS_DENIED); `plain` ones (list, info, folder) abort
 * with the status only, which the error middleware turns into NOT_FOUND / FORBIDDEN / BAD_REQUEST.
 */
function fileError(error: unknown, path: string, style: "coded" | "plain" = "coded"): HttpError {
  if (error instanceof HttpError) return error;
  const { status, code } = daemonFileError((error as { code?: string }).code);
  if (style === "plain") {
    const plainStatus = status === 404 ? 404 : status === 403 ? 403 : 400;
    const message = plainStatus === 404 ? `stat ${path}: no such file or directory` : plainStatus === 403 ? `open ${path}: permission denied` : `${(error as Error).message}`;
    return new HttpError(plainStatus, message, { code: plainStatus === 404 ? "NOT_FOUND" : plainStatus === 403 ? "FORBIDDEN" : "BAD_REQUEST" });
  }
  const reason = status === 404 ? "file not found" : (error as Error).message;
  return new HttpError(status, `${reason}: ${path}`, { code });
}

/** The daemon's `FileInfo`: Go's mode string, RFC 3339 time, numeric owner and group, `0644` permissions. */
function fileInfoDto(info: FileInfo) {
  const kind = info.type === "directory" ? "d" : info.type === "symlink" ? "L" : "-";
  let bits = "";
  for (let i = 0; i < 9; i++) bits += info.mode & (1 << (8 - i)) ? "rwxrwxrwx"[i] : "-";
  return {
    name: info.name,
    size: info.size,
    mode: `${kind}${bits}`,
    modTime: new Date(info.mtimeMs).toISOString(),
    isDir: info.type === "directory",
    owner: String(info.uid),
    group: String(info.gid),
    permissions: (info.mode & 0o777).toString(8).padStart(4, "0"),
  };
}

/** Everything below `root` (the daemon's filepath.Walk), bounded. */
async function walk(jail: Jail, root: string): Promise<FileInfo[]> {
  return jail.files.list(root, { depth: 32, maxEntries: MAX_WALK_ENTRIES }).catch((error: unknown) => {
    throw fileError(error, root, "plain");
  });
}

/** doublestar's glob: `**` any depth, `*` and `?` within a segment, `{a,b}` alternatives. */
function globRegExp(pattern: string): RegExp {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === "*" && pattern[i + 1] === "*") {
      const slash = pattern[i + 2] === "/";
      out += slash ? "(?:.*/)?" : ".*";
      i += slash ? 2 : 1;
    } else if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else if (c === "{") out += "(?:";
    else if (c === "}") out += ")";
    else if (c === "," && out.includes("(?:")) out += "|";
    else out += c.replace(/[.+^$()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${out}$`);
}

async function write(ctx: HttpContext, data: string | Buffer): Promise<void> {
  if (ctx.signal.aborted) throw new Error("the client went away");
  const res = ctx.res as unknown as NodeJS.WritableStream & NodeJS.EventEmitter;
  if (res.write(data)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}
