// The same conformance suite against a real Coder deployment, only when CODER_URL and
// CODER_SESSION_TOKEN are set (it creates and deletes real workspaces of that token's user).
// CODER_TEMPLATE (default paperclip) must declare the runner app (runner/template/main.tf);
// CODER_TRANSPORT picks app-proxy (default), rpty or ssh (ssh needs the coder CLI on PATH).
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";

const url = process.env.CODER_URL;
const token = process.env.CODER_SESSION_TOKEN;
const SKIP_LINE = "live Coder suite skipped: set CODER_URL and CODER_SESSION_TOKEN (optionally CODER_TEMPLATE, CODER_TRANSPORT) to run it against a Coder deployment";

if (!url || !token) {
  describe("coder (live)", () => {
    it.skip(SKIP_LINE, () => undefined);
  });
  console.info(`[coder] ${SKIP_LINE}`);
} else {
  const config = {
    coderUrl: url,
    apiToken: token,
    template: process.env.CODER_TEMPLATE ?? "paperclip",
    commandTransport: process.env.CODER_TRANSPORT ?? "app-proxy",
    // Real builds take minutes: the acquire budget follows the command timeout.
    timeoutMs: 900_000,
  };
  describeConformance({
    name: "coder (live)",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "coder",
    config,
    invalidConfigs: [{ config: { ...config, remoteCwd: "/workspace" }, error: /^Workspace directory: must be a directory directly under \/home\/coder/ }],
    reuseConfig: { ...config, reuseLease: true },
    skip: {
      "resource-labels": "Coder workspaces carry no labels (the name carries their hashes)",
      "failure-after-create-leaves-nothing": "needs fault injection, which only the emulator has",
      "transient-errors-retried": "needs fault injection, which only the emulator has",
      ...(config.commandTransport === "rpty"
        ? { "execute-live-output": "the PTY transport returns output when the command ends", "duplex-channel": "the PTY transport cannot carry a duplex channel" }
        : {}),
    },
  });
}
