import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { createSandboxBackend, type BackendOptions, type SandboxBackend } from "@paperclip-sandbox/sandbox-backend";

export interface EmulatorBackendOptions {
  /** Where the emulator's directory is made (default `/tmp`: the jails' socket paths must stay short). */
  parentDir?: string;
  /** Name prefix of that directory (default the emulator's name). */
  prefix?: string;
  /** Keep the backend's state in this subdirectory, leaving the rest for the emulator's own files (images, snapshots). */
  stateSubdir?: string;
  /** Further backend options (bwrap path, host user, ...). */
  backend?: Omit<BackendOptions, "stateDir">;
}

export interface EmulatorBackend {
  readonly backend: SandboxBackend;
  /** The emulator's own directory (removed on close). */
  readonly root: string;
  /** The backend's state directory (`root`, or `root/<stateSubdir>`): `leases/<sandbox id>/` per jail. */
  readonly stateDir: string;
  /** Closes the backend's handles and removes the directory; idempotent. */
  close(): Promise<void>;
}

/**
 * The bootstrap every emulator with jails shares: a short directory, passable (0711) under root
 * because a root backend's jails run as an unprivileged host uid that must reach their own
 * directories below it; the backend over it; and both gone on close.
 */
export async function startEmulatorBackend(name: string, options: EmulatorBackendOptions = {}): Promise<EmulatorBackend> {
  const root = await mkdtemp(join(options.parentDir ?? "/tmp", `${options.prefix ?? name}-`));
  let backend: SandboxBackend | undefined;
  try {
    if (process.getuid?.() === 0) await chmod(root, 0o711);
    const stateDir = options.stateSubdir ? join(root, options.stateSubdir) : root;
    if (stateDir !== root) await mkdir(stateDir, { recursive: true, mode: 0o700 });
    backend = createSandboxBackend({ ...options.backend, stateDir });
    const opened = backend;
    let closed: Promise<void> | undefined;
    return {
      backend: opened,
      root,
      stateDir,
      close() {
        closed ??= (async () => {
          try {
            await opened.close();
          } finally {
            // The emulator's close waits for its sandboxes and the backend's for work under way; the
            // retries are a backstop for a jail process that still writes a last file (ENOTEMPTY).
            await rm(root, { recursive: true, force: true, maxRetries: 3, retryDelay: 100 });
          }
        })();
        return closed;
      },
    };
  } catch (error) {
    await backend?.close().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
    throw error;
  }
}
