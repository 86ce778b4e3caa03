export const DRIVER_KEY = "hosted-fixture";

export default {
  id: "test.hosted-plugin",
  apiVersion: 1,
  version: "0.0.1",
  displayName: "Hosted plugin (leases gc fixture)",
  description: "A hosted-style provider over a loopback vendor API: sandboxes with labels, listed and deleted over HTTP. Tests only.",
  author: "paperclip-sandbox",
  categories: ["automation"],
  capabilities: ["environment.drivers.register"],
  entrypoints: { worker: "./worker.mjs" },
  environmentDrivers: [
    {
      driverKey: DRIVER_KEY,
      kind: "sandbox_provider",
      displayName: "Hosted fixture",
      configSchema: {
        type: "object",
        properties: { apiUrl: { type: "string" }, apiKey: { type: "string", format: "secret-ref" } },
        additionalProperties: false,
      },
    },
  ],
};
