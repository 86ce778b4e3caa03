/**
 * The host never spreads its own environment into a worker (it would leak host secrets);
 * it passes this short allowlist plus an explicit per-plugin set. We mirror that so a
 * provider that works here does not depend on variables the host would withhold.
 */
export function buildWorkerEnv(pluginId: string, extra: Record<string, string> = {}, source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return {
    PATH: source.PATH ?? "",
    NODE_PATH: source.NODE_PATH ?? "",
    PAPERCLIP_PLUGIN_ID: pluginId,
    NODE_ENV: source.NODE_ENV ?? "production",
    TZ: source.TZ ?? "UTC",
    ...extra,
  };
}
