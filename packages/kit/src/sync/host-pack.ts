import { Readable } from "node:stream";
import { create as createTar } from "tar";
import type { WriteEntry } from "tar";
import { compileExcludes } from "./exclude-glob.js";

export interface TransferCounts {
  /** Regular files carried (hardlinks, symlinks and directories are not counted). */
  files: number;
  /** Content bytes of those files. */
  bytes: number;
}

export interface HostDirectoryPack {
  /** The tar byte stream (uncompressed: the sandbox may only have a bare tar). */
  stream: Readable;
  /** Filled in as entries are written; final once `stream` has ended. */
  counts: TransferCounts;
  /** The first packing error (unreadable file, dangling link with `followSymlinks`), if any. */
  error(): Error | undefined;
}

export interface PackOptions {
  exclude?: string[] | undefined;
  followSymlinks?: boolean | undefined;
}

/**
 * Stream a host directory as a tar archive rooted at `.`, like `tar -c [-h] -C source .`: modes and
 * symlinks are kept (or dereferenced with `followSymlinks`), excluded paths are skipped together
 * with everything below them. Not `portable` mode: that would rewrite modes (0o777 → 0o755).
 */
export function packHostDirectory(source: string, options: PackOptions): HostDirectoryPack {
  const counts: TransferCounts = { files: 0, bytes: 0 };
  const matcher = compileExcludes(options.exclude);
  let firstError: Error | undefined;
  const pack = createTar(
    {
      cwd: source,
      follow: options.followSymlinks === true,
      // Pack passes "./a/b"; the matcher wants "a/b". Returning false for a directory also keeps
      // tar from descending into it.
      filter: (entryPath: string) => !matcher.matchesItself(entryPath.replace(/^\.\//, "")),
      onWriteEntry: (entry: WriteEntry) => {
        if (entry.type === "File") {
          counts.files += 1;
          counts.bytes += entry.stat?.size ?? 0;
        }
      },
    },
    ["."],
  );
  pack.on("error", (error: unknown) => {
    firstError ??= error instanceof Error ? error : new Error(String(error));
  });
  const stream = Readable.from(pack, { objectMode: false });
  stream.on("error", (error: Error) => {
    firstError ??= error;
  });
  return { stream, counts, error: () => firstError };
}
