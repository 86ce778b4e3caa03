import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import type { VendorClock } from "@paperclip-sandbox/emulator-kit";
import { ids } from "./ids.js";
import type { SnapshotStore } from "./snapshots.js";

/**
 * An image: a registry tag (every sandbox runs on the host's read-only tree whatever the tag: the
 * emulator pulls nothing), or a filesystem snapshot (a copy of a sandbox's writable directories).
 */
export interface ImageRecord {
  id: string;
  kind: "registry" | "snapshot";
  tag: string | undefined;
  createdAt: number;
}

export function createImageStore(deps: { clock: VendorClock; snapshots: SnapshotStore }) {
  const images = new Map<string, ImageRecord>();
  const byTag = new Map<string, string>();
  const expiries = new Map<string, () => void>();
  const bySnapshotId = new Map<string, string>();

  const remove = async (imageId: string) => {
    const image = images.get(imageId);
    if (!image) return false;
    images.delete(imageId);
    expiries.get(imageId)?.();
    expiries.delete(imageId);
    if (image.tag !== undefined) byTag.delete(image.tag);
    if (image.kind === "snapshot") await deps.snapshots.remove(imageId);
    return true;
  };

  return {
    get: (imageId: string) => images.get(imageId),
    /** `FROM <tag>` with no further layers: the same tag is the same image. */
    fromRegistry(tag: string): ImageRecord {
      const known = byTag.get(tag);
      if (known) return images.get(known)!;
      const image: ImageRecord = { id: ids.image(), kind: "registry", tag, createdAt: Date.now() };
      images.set(image.id, image);
      byTag.set(tag, image.id);
      return image;
    },
    /** A new snapshot image, made by `capture(imageId)`; a retried snapshot (same snapshot id) gets the same image. */
    async snapshot(snapshotId: string, ttlSeconds: number | undefined, capture: (imageId: string) => Promise<void>): Promise<ImageRecord> {
      const earlier = snapshotId ? bySnapshotId.get(snapshotId) : undefined;
      if (earlier && images.has(earlier)) return images.get(earlier)!;
      const image: ImageRecord = { id: ids.image(), kind: "snapshot", tag: undefined, createdAt: Date.now() };
      await capture(image.id);
      images.set(image.id, image);
      if (snapshotId) bySnapshotId.set(snapshotId, image.id);
      if (ttlSeconds !== undefined && ttlSeconds > 0)
        expiries.set(
          image.id,
          deps.clock.after(ttlSeconds * 1000, () => void remove(image.id)),
        );
      return image;
    },
    async delete(imageId: string): Promise<void> {
      if (!(await remove(imageId))) throw new GrpcError(GrpcStatus.NOT_FOUND, `Image ${imageId} not found`);
    },
    snapshots: () => [...images.values()].filter((image) => image.kind === "snapshot"),
    async close(): Promise<void> {
      for (const cancel of expiries.values()) cancel();
      expiries.clear();
    },
  };
}

export type ImageStore = ReturnType<typeof createImageStore>;
