import { rm } from "node:fs/promises";
import { join } from "node:path";
import { captureDisk, restoreDisk, type Sandbox } from "@paperclip-sandbox/sandbox-backend";

/**
 * Filesystem snapshots as directories: an image is a copy of a sandbox's writable directories (the
 * backend's `captureDisk`: frozen while copied, links kept as links), and a sandbox created from it
 * starts with them restored (`restoreDisk`, which also copes with the jail making its mount points
 * while the copy runs).
 */
export function createSnapshotStore(root: string) {
  const dirOf = (imageId: string) => join(root, imageId);
  return {
    async capture(imageId: string, sandbox: Sandbox): Promise<void> {
      await captureDisk(sandbox, dirOf(imageId));
    },
    /** Before anything runs in a fresh sandbox: its directories get the image's contents. */
    restore: (imageId: string, sandbox: Sandbox): Promise<void> => restoreDisk(dirOf(imageId), sandbox),
    remove(imageId: string): Promise<void> {
      return rm(dirOf(imageId), { recursive: true, force: true });
    },
  };
}

export type SnapshotStore = ReturnType<typeof createSnapshotStore>;
