import type { Image } from "modal";
import { isDigestTemplateName, ownedTemplateName, templateNameOwner, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import { isGone, type ModalAccount } from "./client.js";
import type { ModalConfig } from "./config.js";
import { MODAL_TEMPLATES } from "./manifest.js";
import { deleteImage, type ModalHandle } from "./sandboxes.js";

/** The tag a name is published under (the SDK's default when a name has none). */
const TAG = "latest";

/**
 * Whether an Image value is a custom image Paperclip captured (a published name), not a registry tag.
 * A Modal image keeps no tags or labels, so a template's owner is written into the name it is
 * published under: the kit's digest form only (its older long form is no Modal image name).
 */
export const isTemplateName = (value: string): boolean => isDigestTemplateName(value);

/** The image a template name points at now; null when the name is gone (or its image deleted). */
async function templateImage(account: ModalAccount, name: string): Promise<Image | null> {
  try {
    // The client carries the config's environment: the name is looked up there.
    return await account.call("findTemplateImage", () => account.client.images.fromName(`${name}:${TAG}`), { idempotent: true });
  } catch (error) {
    if (isGone(error)) return null;
    throw error;
  }
}

/** How many checked names an account remembers for the call that follows the check. */
const CHECKED_PER_ACCOUNT = 64;

/**
 * The images the kit's owner check just found, by account and name, so the create (or delete) that
 * follows the check uses it instead of looking the name up again. A name is never published twice
 * (each capture makes a new one), so its image never changes; only a delete ends it, which the
 * check before each use sees.
 */
export function createTemplateImages() {
  const checked = new WeakMap<ModalAccount, Map<string, Image>>();
  return {
    /** Looks the name up (and remembers what it found). */
    async find(account: ModalAccount, name: string): Promise<Image | null> {
      const image = await templateImage(account, name);
      if (image) {
        let names = checked.get(account);
        if (!names) checked.set(account, (names = new Map()));
        names.delete(name);
        names.set(name, image);
        if (names.size > CHECKED_PER_ACCOUNT) names.delete(names.keys().next().value!);
      }
      return image;
    },
    /** The image the last check found, once; else a fresh look-up. */
    take(account: ModalAccount, name: string): Promise<Image | null> {
      const names = checked.get(account);
      const image = names?.get(name);
      if (!image) return templateImage(account, name);
      names!.delete(name);
      return Promise.resolve(image);
    },
  };
}

export type TemplateImages = ReturnType<typeof createTemplateImages>;

/**
 * Custom images on Modal: capture snapshots the setup sandbox's filesystem (`TaskSnapshotFilesystem`,
 * no expiry) and publishes the image under a name holding its owner (`ImagePublish`, in the config's
 * environment); a run starts from the image the name points at (`ImageGetByTag` in the owner check,
 * see plugin.ts); delete removes the image (`ImageDelete`), then the name (`ImageNameDelete`).
 */
export function modalTemplates(accountOf: (config: ModalConfig) => Promise<ModalAccount>, images: TemplateImages): TemplateDeclaration<ModalHandle, ModalConfig> {
  return {
    ...MODAL_TEMPLATES,
    isTemplateRef: isTemplateName,
    async capture(handle, _ref, { labels, signal }) {
      const { account, sandbox } = handle;
      const image = await account.call("snapshotFilesystem", () => sandbox.snapshotFilesystem({ ttlMs: null }), { idempotent: false });
      const name = ownedTemplateName(labels);
      try {
        signal.throwIfAborted();
        await account.call("publishImage", () => image.publish(`${name}:${TAG}`), { idempotent: true });
      } catch (error) {
        // Never an image the host does not know about.
        await deleteImage(account, image.imageId).catch(() => undefined);
        throw error;
      }
      return { templateRef: name, metadata: { imageId: image.imageId } };
    },
    async labels(templateRef, config, expected) {
      // Not a name this provider gives (a registry tag, say): no template of Paperclip's.
      const owner = isTemplateName(templateRef) ? templateNameOwner(templateRef, expected) : null;
      if (!owner) return null;
      return (await images.find(await accountOf(config), templateRef)) ? owner : null;
    },
    async delete(templateRef, config) {
      const account = await accountOf(config);
      const image = await images.take(account, templateRef);
      // The image first: a delete that stops half way leaves at most a name pointing at nothing.
      if (image) await deleteImage(account, image.imageId);
      try {
        await account.call(
          "deleteImageName",
          () =>
            account.client.cpClient.imageNameDelete({
              tag: `${templateRef}:${TAG}`,
            }),
          { idempotent: true },
        );
      } catch (error) {
        if (!isGone(error)) throw error;
      }
    },
  };
}
