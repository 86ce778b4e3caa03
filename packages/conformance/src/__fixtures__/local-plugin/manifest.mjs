export default {
  id: "test.local-plugin",
  apiVersion: 1,
  version: "0.0.1",
  displayName: "Local plugin (conformance self-test fixture)",
  description: "Runs commands on this machine in a temp dir per lease. No isolation; tests only.",
  author: "paperclip-sandbox",
  categories: ["automation"],
  capabilities: ["environment.drivers.register"],
  entrypoints: { worker: "./worker.mjs" },
  environmentDrivers: [{ driverKey: "local-fixture", kind: "sandbox_provider", displayName: "Local fixture", supportsReusableLeases: true, sandboxCapabilities: { reusableLeases: true } }],
};
