import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createVendorClock, GrpcError, GrpcStatus, requireGrpcCredential, type EmulatorDefinition, type GrpcCall } from "@paperclip-sandbox/emulator-kit";
import { controlPlaneHandlers, type AppRecord } from "./control-plane.js";
import { refusedPaths } from "./coverage.js";
import { ids } from "./ids.js";
import { createImageNames } from "./image-names.js";
import { createImageStore } from "./images.js";
import { resolveOptions, type ModalEmulatorOptions } from "./options.js";
import { routerHandlers } from "./router.js";
import { createSandboxManager } from "./sandboxes.js";
import { createSnapshotStore } from "./snapshots.js";
import { createTokenIssuer } from "./tokens.js";

export type { ModalEmulatorOptions } from "./options.js";
export { FS_TOOLS_PATH } from "./fs-tools.js";
export { MODAL_COVERAGE } from "./coverage.js";

const PROTO_DIR = fileURLToPath(new URL("../proto", import.meta.url));
export const MODAL_PROTO_PATHS = [join(PROTO_DIR, "modal_client.proto"), join(PROTO_DIR, "task_command_router.proto")];

const CONTROL_PLANE = "modal.client.ModalClient";
const ROUTER = "modal.task_command_router.TaskCommandRouter";

/**
 * Modal's gRPC API on loopback: the control plane (auth token, apps, images, secrets, sandboxes V1
 * and V2, tags, lists, names) and the task command router (exec, stdio by offset, stdin by offset
 * and as a client stream, wait/poll, filesystem snapshots, and the fs-tools protocol the SDK runs
 * as an exec), on one plaintext port. Point the SDK at it with `MODAL_SERVER_URL=<url>`; the router
 * URL it hands out is `https://` on the same port, which the SDK dials without TLS because the
 * server is a loopback address. Sandboxes are bubblewrap jails from the sandbox backend.
 */
export const emulator: EmulatorDefinition<ModalEmulatorOptions> = {
  name: "modal",
  description: "Modal's gRPC control plane and task command router (sandboxes, exec, files, snapshots)",
  async start(kit, options) {
    const resolved = resolveOptions(options, ids);
    // The jails in `b/`, snapshot images beside them in `images/`.
    const { backend, root } = await kit.backend({ parentDir: resolved.scratchParent, prefix: "mdl", stateSubdir: "b" });
    const clock = resolved.clock ?? createVendorClock({ timeScale: resolved.timeScale });
    const snapshots = createSnapshotStore(join(root, "images"));
    const images = createImageStore({ clock, snapshots });
    const imageNames = createImageNames({ images });
    const issuer = createTokenIssuer();
    const apps = new Map<string, AppRecord>();
    const sandboxes = createSandboxManager({
      backend,
      clock,
      images,
      snapshots,
      appExists: (appId) => apps.has(appId),
      maxSandboxes: resolved.maxSandboxes,
      log: (message) => process.stderr.write(`${message}\n`),
    });
    let routerUrl = "";

    const authorize = (call: GrpcCall) => {
      if (!call.path.startsWith(`/${CONTROL_PLANE}/`)) return; // router calls check their task token
      if (call.path === `/${CONTROL_PLANE}/AuthTokenGet`) {
        requireGrpcCredential(call.metadata, { key: "x-modal-token-id", bearer: false, accept: [resolved.tokenId], missingMessage: "Token missing", invalidMessage: "Invalid token id or secret" });
        requireGrpcCredential(call.metadata, {
          key: "x-modal-token-secret",
          bearer: false,
          accept: [resolved.tokenSecret],
          missingMessage: "Token missing",
          invalidMessage: "Invalid token id or secret",
        });
        return;
      }
      const token = call.metadata.get("x-modal-auth-token")[0];
      if (!issuer.verify(typeof token === "string" ? token : undefined, "auth")) {
        throw new GrpcError(GrpcStatus.UNAUTHENTICATED, "missing, invalid or expired auth token (call AuthTokenGet)");
      }
    };

    const server = await kit.grpc({
      protoPath: MODAL_PROTO_PATHS,
      includeDirs: [PROTO_DIR],
      loaderOptions: { longs: Number, enums: String },
      port: resolved.port,
      authorize,
      refused: refusedPaths(),
      secretHeaders: ["x-modal-token-id", "x-modal-token-secret", "x-modal-auth-token"],
      services: {
        [CONTROL_PLANE]: controlPlaneHandlers({
          apps,
          sandboxes,
          images,
          imageNames,
          issuer,
          tokenId: resolved.tokenId,
          authTokenTtlSeconds: resolved.authTokenTtlSeconds,
          routerTokenTtlSeconds: resolved.routerTokenTtlSeconds,
          routerUrl: () => routerUrl,
        }),
        [ROUTER]: routerHandlers({ sandboxes, images, issuer }),
      },
    });
    routerUrl = `https://${server.target}`;

    return {
      url: server.url,
      endpoints: { router: routerUrl },
      credentials: { tokenId: resolved.tokenId, tokenSecret: resolved.tokenSecret },
      env: { MODAL_SERVER_URL: server.url, MODAL_TOKEN_ID: resolved.tokenId, MODAL_TOKEN_SECRET: resolved.tokenSecret },
      async leftovers() {
        return [
          ...sandboxes.running().map((s) => `sandbox ${s.id} (running)`),
          ...images.snapshots().map((image) => `image ${image.id} (filesystem snapshot)`),
          // A name whose image is gone holds nothing.
          ...imageNames
            .all()
            .filter((name) => images.get(name.imageId))
            .map((name) => `image name ${name.tag} in ${name.environment} (-> ${name.imageId})`),
        ];
      },
      async close() {
        await sandboxes.close();
        await images.close();
      },
    };
  },
};
