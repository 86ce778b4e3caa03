// The conformance suite against a real cluster, when KUBECONFIG names a kubeconfig (one file).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { describeConformance } from "@paperclip-sandbox/conformance";

const path = process.env.KUBECONFIG;
if (!path) {
  describe("kubernetes live", () => it.skip("set KUBECONFIG=<kubeconfig path> to run the conformance suite against a real cluster", () => {}));
} else {
  const config = { kubeconfig: readFileSync(path, "utf8"), companySlug: "conformance-live", timeoutMs: 120_000, readyTimeoutSec: 300 };
  describeConformance({
    name: "kubernetes-live",
    pluginDir: fileURLToPath(new URL("..", import.meta.url)),
    driverKey: "kubernetes",
    config,
    invalidConfigs: [{ config: { inCluster: true, kubeconfig: "x" }, error: /\(2 set\)/ }],
    reuseConfig: { ...config, reuseLease: true },
  });
}
