import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { HttpError, multipartBoundary, parseMultipart, type HttpContext, type Router } from "@paperclip-sandbox/emulator-kit";
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

/**
 * The daemon's file API as the SDK uses it: bulk upload (multipart `files[i].path` + `files[i].file`
 * pairs; parents created) and bulk download (a multipart answer with one part per path whose
 * `filename` is the path asked for, or an `error` part), plus the directory lookups.
 */
export function registerFileRoutes(router: Router, deps: FileDeps): void {
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

/** A backend file error as the daemon's coded error (never a 500 for a missing file). */
function fileError(error: unknown, path: string): HttpError {
  if (error instanceof HttpError) return error;
  const { status, code } = daemonFileError((error as { code?: string }).code);
  const reason = status === 404 ? "file not found" : (error as Error).message;
  return new HttpError(status, `${reason}: ${path}`, { code });
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
