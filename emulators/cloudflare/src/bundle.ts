import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { build } from "esbuild";

/**
 * The Worker miniflare runs: the bridge's own entry, unmodified, with one stand-in. The exported
 * `Sandbox` Durable Object class is a subclass that gives `ctx.container` (which workerd sets only
 * when a container engine runs the DO) before the SDK's constructor reads it. Everything else —
 * the bridge, `@cloudflare/sandbox`, `@cloudflare/containers` — is the real code, bundled as
 * wrangler would (esbuild, conditions workerd/worker/browser, `cloudflare:*` and `node:*` external).
 */
const SHIM = `
import bridge, { Sandbox as BridgeSandbox, LeaseRegistry } from "./src/index.ts";
export { LeaseRegistry };

function standInContainer(id, base) {
  let running = false;
  let exited = Promise.resolve();
  let onExit = () => {};
  const prefix = base + "/c/" + id;
  const rewrite = (input, port) => {
    const url = new URL(typeof input === "string" ? input : input.url);
    return prefix + "/p/" + port + url.pathname + url.search;
  };
  return {
    get running() { return running; },
    start() {
      running = true;
      exited = new Promise((resolve) => (onExit = resolve));
    },
    monitor() { return exited; },
    async destroy() {
      await fetch(prefix + "/lifecycle/destroy", { method: "POST" });
      running = false;
      onExit();
    },
    signal() {},
    getTcpPort(port) {
      return {
        fetch(input, init) {
          if (input instanceof Request) return fetch(new Request(rewrite(input, port), input));
          return fetch(rewrite(input, port), init);
        },
      };
    },
  };
}

export class Sandbox extends BridgeSandbox {
  constructor(ctx, env) {
    Object.defineProperty(ctx, "container", { value: standInContainer(ctx.id.toString(), env.EMULATOR_CONTAINER_URL), configurable: true });
    super(ctx, env);
  }
}

export default bridge;
`;

/** The bridge package's folder (its `src/` is bundled as is). */
export function bridgeDir(): string {
  return dirname(createRequire(import.meta.url).resolve("@paperclip-sandbox/cloudflare-bridge/package.json"));
}

export async function bundleBridge(): Promise<string> {
  const dir = bridgeDir();
  const result = await build({
    stdin: { contents: SHIM, resolveDir: dir, sourcefile: "emulator-entry.js", loader: "js" },
    bundle: true,
    write: false,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    external: ["cloudflare:*", "node:*"],
    nodePaths: [join(dir, "node_modules")],
    logLevel: "silent",
  });
  return result.outputFiles[0]!.text;
}
