import { GrpcError, GrpcStatus } from "@paperclip-sandbox/emulator-kit";
import type { ImageStore } from "./images.js";

/** The environment an empty `environment_name` means (the workspace's default, as EnvironmentGetOrCreate names it). */
const DEFAULT_ENVIRONMENT = "main";

/** An object name as the SDK checks it (`checkObjectName`): letters, digits, `-`, `.`, `_`, shorter than 64. */
const OBJECT_NAME = /^[A-Za-z0-9._-]{1,63}$/;

/**
 * A named image's full tag as the SDK sends it: `<name>:<tag>`, `:latest` added when the name has
 * none; `<workspace>/<name>:<tag>` names another workspace's image. An image name may not start
 * with `im-` (image ids do).
 */
function parseTag(tag: string): {
  workspace: string | null;
  name: string;
  tag: string;
} {
  const colon = tag.indexOf(":");
  const ref = colon === -1 ? tag : tag.slice(0, colon);
  const version = colon === -1 ? "" : tag.slice(colon + 1);
  const slash = ref.lastIndexOf("/");
  const workspace = slash === -1 ? null : ref.slice(0, slash);
  const name = ref.slice(slash + 1);
  if (!OBJECT_NAME.test(name) || name.startsWith("im-") || !OBJECT_NAME.test(version)) {
    throw new GrpcError(
      GrpcStatus.INVALID_ARGUMENT,
      `Invalid Image tag '${tag}': it must be <name>:<tag>, each part letters, digits, dashes, periods and underscores, shorter than 64 characters (an Image name cannot start with 'im-')`,
    );
  }
  return { workspace, name, tag: version };
}

/**
 * Modal's named images (`Image.publish`, `images.fromName`): a name per environment of the workspace
 * points at an image id, and publishing the name again moves it. The name is not the image: deleting
 * the image leaves the name pointing at nothing (a lookup answers NOT_FOUND), and deleting the name
 * (`ImageNameDelete`) leaves the image.
 */
export function createImageNames(deps: { images: ImageStore }) {
  const names = new Map<string, { environment: string; tag: string; imageId: string }>();
  const keyOf = (environment: string, tag: string) => `${environment}\u0000${tag}`;

  /** Names in this workspace only: another workspace's (`<workspace>/<name>`) are not modelled. */
  const local = (tag: string): string => {
    const parsed = parseTag(tag);
    if (parsed.workspace !== null) throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, "emulator limit: images of another workspace (<workspace>/<name>) are not served");
    return `${parsed.name}:${parsed.tag}`;
  };

  return {
    publish(imageId: string, tag: string, environmentName: string): { image_id: string } {
      const full = local(tag);
      if (!deps.images.get(imageId)) throw new GrpcError(GrpcStatus.NOT_FOUND, `Could not find image with ID ${imageId}`);
      const environment = environmentName || DEFAULT_ENVIRONMENT;
      names.set(keyOf(environment, full), { environment, tag: full, imageId });
      return { image_id: imageId };
    },
    getByTag(tag: string, environmentName: string): { image_id: string } {
      const full = local(tag);
      const environment = environmentName || DEFAULT_ENVIRONMENT;
      const found = names.get(keyOf(environment, full));
      if (!found || !deps.images.get(found.imageId)) throw new GrpcError(GrpcStatus.NOT_FOUND, `Image '${full}' not found in environment '${environment}'`);
      return { image_id: found.imageId };
    },
    /** The request names no environment: the name is removed from the workspace's default one. */
    delete(tag: string): void {
      const full = local(tag);
      if (!names.delete(keyOf(DEFAULT_ENVIRONMENT, full))) throw new GrpcError(GrpcStatus.NOT_FOUND, `Image '${full}' not found in environment '${DEFAULT_ENVIRONMENT}'`);
    },
    all: () => [...names.values()],
  };
}

export type ImageNames = ReturnType<typeof createImageNames>;
