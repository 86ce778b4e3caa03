import { createHash, randomBytes } from "node:crypto";
import { pollUntil, type TemplateDeclaration } from "@paperclip-sandbox/kit";
import type { BoxdApi } from "./api.js";
import type { BoxdConfig } from "./config.js";
import type { BoxdHandle } from "./machines.js";
import { BOXD_TEMPLATES } from "./manifest.js";

/** The owner labels a template name's digest covers, in this order. */
const OWNER_LABELS = ["paperclip-provider", "paperclip-company", "paperclip-environment"] as const;
/** `pc-<16 hex: digest of the owner labels>-<8 hex random>`: a DNS label, unique per capture. */
const TEMPLATE_NAME = /^pc-([0-9a-f]{16})-[0-9a-f]{8}$/;
/** Polling a pending snapshot: from this pause, doubling, up to the cap. */
const POLL_FIRST_MS = 100;
const POLL_MAX_MS = 2_000;

/**
 * boxd keeps no labels on a snapshot (its request has a machine and a name only), so a template's
 * owner is written into its name: a digest of the provider, company and environment labels.
 */
function ownerDigest(labels: Readonly<Record<string, string | undefined>>): string {
  return createHash("sha256")
    .update(OWNER_LABELS.map((key) => labels[key] ?? "").join("\0"))
    .digest("hex")
    .slice(0, 16);
}

/** A new template's snapshot name for a setup machine carrying `labels`. */
function templateName(labels: Readonly<Record<string, string | undefined>>): string {
  return `pc-${ownerDigest(labels)}-${randomBytes(4).toString("hex")}`;
}

/**
 * Custom images on boxd: a template is a boxd snapshot of the setup machine (`CreateSnapshot`,
 * polled with `GetSnapshot` until `ready`), runs start from it (`CreateVmFromSnapshot`, see
 * plugin.ts), and delete is `DeleteSnapshot`. Snapshots live in the key's org: another org's key
 * finds none.
 */
export function boxdTemplates(apiOf: (config: BoxdConfig) => BoxdApi): TemplateDeclaration<BoxdHandle, BoxdConfig> {
  return {
    ...BOXD_TEMPLATES,
    async capture(handle, ref, { labels, signal }) {
      const api = handle.api;
      const name = templateName(labels);
      await api.createSnapshot(handle.machine.id, name, signal);
      try {
        const snapshot = await pollUntil(
          () => api.getSnapshot(name, ref.config.org, signal),
          (seen) => !seen || seen.status === "ready" || seen.status === "failed",
          { what: `boxd snapshot ${name} to be saved`, intervalMs: POLL_FIRST_MS, maxIntervalMs: POLL_MAX_MS, signal },
        );
        if (!snapshot) throw new Error(`boxd: snapshot ${name} disappeared while it was being saved`);
        if (snapshot.status === "failed") throw new Error(`boxd: saving snapshot ${name} of machine ${handle.machine.id} failed`);
        return {
          templateRef: name,
          metadata: {
            version: snapshot.version,
            sizeBytes: snapshot.sizeBytes,
            vcpu: snapshot.vcpu,
          },
        };
      } catch (error) {
        // Never a half-made template the host does not know about.
        await api.deleteSnapshot(name, ref.config.org).catch(() => undefined);
        throw error;
      }
    },
    async labels(templateRef, config, expected) {
      const snapshot = await apiOf(config).getSnapshot(templateRef, config.org);
      if (!snapshot || snapshot.status === "failed") return null;
      const digest = TEMPLATE_NAME.exec(templateRef)?.[1];
      // Not a name this provider gives: an operator's snapshot (the Snapshot field is for those), no owner.
      if (!digest) return {};
      if (digest === ownerDigest(expected)) return { ...expected };
      // Another owner's: which one is not recoverable from a digest, so both ids differ.
      return {
        "paperclip-provider": expected["paperclip-provider"] ?? "",
        "paperclip-company": `digest ${digest}`,
        "paperclip-environment": `digest ${digest}`,
      };
    },
    async delete(templateRef, config) {
      await apiOf(config).deleteSnapshot(templateRef, config.org);
    },
  };
}
