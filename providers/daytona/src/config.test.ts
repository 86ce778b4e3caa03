// Every validation rule with its exact message, through the plugin's validate hook as the host calls it.
import { describe, expect, it } from "vitest";
import { RESOURCES_NEED_IMAGE, SNAPSHOT_AND_IMAGE } from "./config.js";
import { createDaytonaPlugin } from "./plugin.js";

const { definition } = createDaytonaPlugin({ env: {} });
const validate = (config: Record<string, unknown>) => definition.onEnvironmentValidateConfig!({ driverKey: "daytona", config });
const base = { apiKey: "dtn_test" };

describe("validation", () => {
  it("accepts a minimal config and fills the quota-safe defaults only where unset", async () => {
    const result = await validate(base);
    expect(result).toMatchObject({ ok: true, errors: [], warnings: [] });
    expect(result.normalizedConfig).toMatchObject({
      apiUrl: "https://app.daytona.io/api",
      autoStopInterval: 15,
      autoArchiveInterval: 60,
      autoDeleteInterval: 10_080,
      timeoutMs: 300_000,
      reuseLease: false,
      liveOutput: false,
    });
    const explicit = await validate({ ...base, autoStopInterval: 0, autoArchiveInterval: 0, autoDeleteInterval: -1 });
    expect(explicit.normalizedConfig).toMatchObject({ autoStopInterval: 0, autoArchiveInterval: 0, autoDeleteInterval: -1 });
  });

  it.each([
    ["resources without an image", { cpu: 2 }, RESOURCES_NEED_IMAGE],
    ["memory without an image", { snapshot: "my-snap", memory: 2 }, RESOURCES_NEED_IMAGE],
    ["disk without an image", { disk: 10 }, RESOURCES_NEED_IMAGE],
    ["gpu without an image", { gpu: 1 }, RESOURCES_NEED_IMAGE],
    ["snapshot and image", { snapshot: "my-snap", image: "python:3.12-slim" }, SNAPSHOT_AND_IMAGE],
    ["snapshot and image with resources", { snapshot: "s", image: "i", cpu: 1 }, SNAPSHOT_AND_IMAGE],
    ["memory not 1, 2, 4 or 8", { image: "i", memory: 3 }, "Memory (GiB): must be one of 1, 2, 4, 8"],
    ["cpu 0", { image: "i", cpu: 0 }, "CPU (cores): must be at least 1"],
    ["fractional disk", { image: "i", disk: 1.5 }, "Disk (GiB): must be an integer"],
    ["gpu 0", { image: "i", gpu: 0 }, "GPU (units): must be at least 1"],
    ["timeout 0", { timeoutMs: 0 }, "Command timeout (ms): must be at least 1"],
    ["timeout over a day", { timeoutMs: 86_400_001 }, "Command timeout (ms): must be at most 86400000"],
    ["negative auto-stop", { autoStopInterval: -1 }, "Auto-stop after idle (min): must be at least 0"],
    ["negative auto-archive", { autoArchiveInterval: -1 }, "Auto-archive after stop (min): must be at least 0"],
    ["auto-delete below -1", { autoDeleteInterval: -2 }, "Auto-delete after stop (min): must be at least -1"],
    ["a snapshot name with spaces", { snapshot: "my snap" }, "Snapshot: must not contain spaces"],
    ["an image with spaces", { image: "python 3" }, "Image: must not contain spaces"],
    ["an http API URL off loopback", { apiUrl: "http://daytona.example/api" }, "API URL: must use https (http is allowed only for localhost, 127.0.0.0/8 and ::1)"],
    ["a target with capitals", { target: "US" }, "Target: must be a Daytona target such as us or eu"],
    ["an unknown field", { sandboxSize: "big" }, "sandboxSize: unknown field (not accepted by this provider)"],
  ])("refuses %s", async (_what, config, message) => {
    expect(await validate({ ...base, ...config })).toMatchObject({ ok: false, errors: [message] });
  });

  it("treats blank strings as unset (the host's form sends them for cleared fields)", async () => {
    const result = await validate({ ...base, snapshot: "", image: "  ", target: "" });
    expect(result.ok).toBe(true);
    expect(result.normalizedConfig).not.toHaveProperty("snapshot");
    expect(result.normalizedConfig).not.toHaveProperty("image");
  });

  it("accepts image-backed resources, and warns without any API key", async () => {
    expect(await validate({ ...base, image: "python:3.12-slim", cpu: 2, memory: 4, disk: 10, gpu: 1 })).toMatchObject({ ok: true });
    expect(await validate({})).toMatchObject({ ok: true, warnings: ["no API key: set API key, or DAYTONA_API_KEY in the plugin worker's environment"] });
  });
});
