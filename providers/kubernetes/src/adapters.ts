/** What each Paperclip adapter needs from its pod: the runtime image and the hosts it must reach. */
export interface AdapterDefaults {
  image: string;
  egressFqdns: string[];
}

export const ADAPTERS: Record<string, AdapterDefaults> = {
  claude_local: { image: "ghcr.io/paperclipai/agent-runtime-claude:v1", egressFqdns: ["api.anthropic.com"] },
  codex_local: { image: "ghcr.io/paperclipai/agent-runtime-codex:v1", egressFqdns: ["api.openai.com"] },
};

export const ADAPTER_TYPES = Object.keys(ADAPTERS) as [string, ...string[]];

/** The run's adapter when the host names a known one, else the environment's. */
export function adapterFor(requested: string | undefined, configured: string): { type: string; defaults: AdapterDefaults } {
  const type = requested && ADAPTERS[requested] ? requested : configured;
  return { type, defaults: ADAPTERS[type]! };
}

/** `ghcr.io/paperclipai/x:v1` with `imageRegistry: registry.example.com/mirror` → `registry.example.com/mirror/paperclipai/x:v1`. */
export function withRegistry(image: string, registry: string | undefined): string {
  if (!registry) return image;
  const slash = image.indexOf("/");
  const path = slash >= 0 && /[.:]|^localhost$/.test(image.slice(0, slash)) ? image.slice(slash + 1) : image;
  return `${registry.replace(/\/+$/, "")}/${path}`;
}

/** Glob match for the image allow-list: `*` is any run of characters (also `/` and `:`). */
export function imageAllowed(image: string, allowList: readonly string[]): boolean {
  return allowList.some((pattern) =>
    new RegExp(
      `^${pattern
        .split("*")
        .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*")}$`,
    ).test(image),
  );
}
