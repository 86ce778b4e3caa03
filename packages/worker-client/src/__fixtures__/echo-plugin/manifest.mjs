export default {
  id: "test.echo-plugin",
  apiVersion: 1,
  version: "1.2.3",
  displayName: "Echo plugin (worker-client test fixture)",
  description: "Answers environment hooks with what it was sent; used only by worker-client tests.",
  author: "paperclip-sandbox",
  categories: ["automation"],
  capabilities: ["environment.drivers.register"],
  entrypoints: { worker: "./worker.mjs" },
  environmentDrivers: [{ driverKey: "echo", kind: "sandbox_provider", displayName: "Echo" }],
};
