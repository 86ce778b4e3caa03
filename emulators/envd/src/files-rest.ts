import { createGunzip } from "node:zlib";
import type { Readable } from "node:stream";
import { HttpError, multipartBoundary, parseMultipart, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
import { SandboxFileError, type FileInfo } from "@paperclip-sandbox/sandbox-backend";
import { posix } from "node:path";
import { checkUser, envdTarget, resolveSandboxPath, userFromAuthorization } from "./envd-access.js";
import type { SandboxRegistry } from "./sandboxes.js";

/** Largest single file part accepted (envd streams to disk; the emulator bounds what it parses). */
const MAX_PART_BYTES = 2 * 1024 * 1024 * 1024;

/**
 * envd's REST side: `GET /health`, and `/files`: download (raw bytes) and upload, multipart (one
 * part per file, destination from `?path=` or the part's filename) or octet-stream (one file,
 * `?path=`, optionally gzip). Bodies are streamed into the jail, never held whole.
 */
export function filesRoutes(router: Router, sandboxes: SandboxRegistry): void {
  router.get("/health", (ctx) => {
    envdTarget(ctx, sandboxes);
    ctx.send(204);
  });

  // The sandbox's environment variables (the create's envVars), as envd reports them.
  router.get("/envs", (ctx) => {
    const { sandbox } = envdTarget(ctx, sandboxes);
    return { ...sandbox.envVars };
  });

  router.get("/files", async (ctx) => {
    const { sandbox } = envdTarget(ctx, sandboxes);
    checkUser(ctx.query.get("username") ?? userFromAuthorization(ctx.header("authorization")));
    const path = resolveSandboxPath(ctx.query.get("path") ?? undefined);
    const info = await sandbox.jail.files.stat(path, { follow: true }).catch(restFileError(path));
    if (info.type === "directory") throw new HttpError(400, `path '${path}' is a directory`);
    // The size announced is the size sent, as envd's ServeContent copies exactly what it stat'ed: a
    // file replaced or grown between the stat and the read is cut at that size, never sent longer
    // than its Content-Length (the extra bytes would stand before the next answer on the connection).
    const stream = await sandbox.jail.files.readStream(path, { length: info.size }).catch(restFileError(path));
    ctx.res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": info.size,
      "content-disposition": `attachment; filename=${JSON.stringify(posix.basename(path))}`,
    });
    const sent = await pipeCounted(stream, ctx);
    // Shorter than announced (replaced by a smaller file): the client must see a cut answer, not wait for the rest.
    if (sent < info.size) ctx.cut();
  });

  router.post("/files", async (ctx) => {
    const { sandbox } = envdTarget(ctx, sandboxes);
    checkUser(ctx.query.get("username") ?? userFromAuthorization(ctx.header("authorization")));
    const queryPath = ctx.query.get("path") ?? undefined;
    const type = ctx.header("content-type") ?? "";
    const written: FileInfo[] = [];
    if (/^multipart\/form-data/i.test(type)) {
      const boundary = multipartBoundary(type);
      if (!boundary) throw new HttpError(400, "multipart/form-data without a boundary");
      const seen = new Set<string>();
      for await (const part of parseMultipart(ctx.body(), boundary, { maxPartBytes: MAX_PART_BYTES, maxTotalBytes: Number.MAX_SAFE_INTEGER })) {
        if (part.name !== "file") {
          part.body.resume();
          continue;
        }
        const path = resolveSandboxPath(queryPath ?? part.filename, "path (query or part filename)");
        if (seen.has(path)) throw new HttpError(400, `cannot upload multiple files to the same path '${path}'`);
        seen.add(path);
        written.push(await sandbox.jail.files.write(path, part.body).catch(restFileError(path)));
      }
      if (written.length === 0) throw new HttpError(400, "no file part in the upload");
    } else if (/^application\/octet-stream/i.test(type) || type === "") {
      const path = resolveSandboxPath(queryPath);
      const encoding = (ctx.header("content-encoding") ?? "identity").toLowerCase();
      if (encoding !== "identity" && encoding !== "gzip") throw new HttpError(400, `content-encoding ${JSON.stringify(encoding)} is not supported`);
      const body = encoding === "gzip" ? ctx.body().pipe(createGunzip()) : ctx.body();
      written.push(await sandbox.jail.files.write(path, body).catch(restFileError(path)));
    } else {
      throw new HttpError(400, `unsupported content type ${JSON.stringify(type)}: use multipart/form-data or application/octet-stream`);
    }
    ctx.sendJson(
      200,
      written.map((info) => ({ name: info.name, type: "file", path: info.path })),
    );
  });
}

/** Pipes the file to the answer; resolves with the bytes it read once the file ended (or the answer closed). */
function pipeCounted(stream: Readable, ctx: HttpContext): Promise<number> {
  return new Promise((resolve, reject) => {
    let bytes = 0;
    stream.on("data", (chunk: Buffer) => (bytes += chunk.length));
    stream.on("error", (error) => {
      ctx.cut();
      reject(error);
    });
    ctx.res.on("close", () => {
      stream.destroy();
      resolve(bytes);
    });
    stream.pipe(ctx.res);
    stream.on("end", () => resolve(bytes));
  });
}

/** Backend errno codes as envd's REST statuses. */
function restFileError(path: string) {
  return (error: unknown): never => {
    if (error instanceof SandboxFileError) {
      switch (error.code) {
        case "ENOENT":
          throw new HttpError(404, `path '${path}' does not exist`);
        case "EISDIR":
          throw new HttpError(400, `path '${path}' is a directory`);
        case "ENOTDIR":
          throw new HttpError(400, `a parent of '${path}' is not a directory`);
        case "EACCES":
        case "EPERM":
        case "EROFS":
          throw new HttpError(403, `permission denied: '${path}'`);
        case "ENOSPC":
          throw new HttpError(507, "not enough disk space");
      }
    }
    throw error;
  };
}
