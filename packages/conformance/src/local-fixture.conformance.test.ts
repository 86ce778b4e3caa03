// Self-test of the suite: the local fixture plugin must pass every case, through the worker client.
import { fileURLToPath } from "node:url";
import { describeConformance, findLocalLeftovers } from "./index.js";

describeConformance({
  name: "local-fixture",
  pluginDir: fileURLToPath(new URL("./__fixtures__/local-plugin", import.meta.url)),
  driverKey: "local-fixture",
  config: { timeoutMs: 60_000 },
  invalidConfigs: [
    { config: { timeoutMs: -1 }, error: /timeoutMs/ },
    { config: { reuseLease: "yes" }, error: /reuseLease/ },
  ],
  reuseConfig: { timeoutMs: 60_000, reuseLease: true },
  leftovers: findLocalLeftovers,
});
