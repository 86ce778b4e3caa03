import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * The environment for an npm child: ours without the `npm_*` variables an enclosing `npm run`
 * sets (`npm_config_local_prefix` and the like would point the child at this repository).
 */
export function cleanNpmEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_/i.test(key)) env[key] = value;
  return { ...env, ...extra };
}

export interface NpmOptions {
  cwd: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** Runs npm with `args`; rejects with npm's stderr tail in the message. */
export async function npm(args: readonly string[], opts: NpmOptions): Promise<string> {
  try {
    const { stdout } = await run("npm", [...args], {
      cwd: opts.cwd,
      env: cleanNpmEnv(opts.env),
      timeout: opts.timeoutMs ?? 300_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message?: string };
    const tail = String(e.stderr ?? "")
      .trim()
      .split("\n")
      .slice(-15)
      .join("\n");
    throw new Error(`npm ${args.join(" ")} (in ${opts.cwd}) failed: ${tail || e.message}`);
  }
}

export interface PackedFile {
  path: string;
  size: number;
  mode: number;
}

export interface PackResult {
  name: string;
  version: string;
  /** The tarball's file name (`paperclip-sandbox-kit-0.1.0.tgz`). */
  filename: string;
  integrity: string;
  files: PackedFile[];
}

/** `npm pack` of one package folder (never its scripts); `destination` unset means a dry run. */
export async function npmPack(dir: string, destination?: string): Promise<PackResult> {
  const args = ["pack", "--json", "--ignore-scripts", ...(destination ? ["--pack-destination", destination] : ["--dry-run"])];
  const out = await npm(args, { cwd: dir });
  const parsed = JSON.parse(out) as PackResult[];
  const first = parsed[0];
  if (parsed.length !== 1 || !first) throw new Error(`npm pack in ${dir} reported ${parsed.length} packages`);
  return { name: first.name, version: first.version, filename: first.filename, integrity: first.integrity, files: first.files };
}
