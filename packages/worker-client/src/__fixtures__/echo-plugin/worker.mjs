// A tiny plugin worker driven by the worker-client tests. `execute.command` picks a behaviour.
import { definePlugin, runWorker } from "@paperclipai/plugin-sdk";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let ctx;

const plugin = definePlugin({
  async setup(context) {
    ctx = context;
  },
  async onEnvironmentValidateConfig(params) {
    return { ok: true, normalizedConfig: params.config };
  },
  async onEnvironmentProbe() {
    // Lets tests see the scrubbed environment the worker was given.
    return { ok: true, metadata: { envKeys: Object.keys(process.env).sort(), pluginId: process.env.PAPERCLIP_PLUGIN_ID } };
  },
  async onEnvironmentExecute(params) {
    const args = params.args ?? [];
    switch (params.command) {
      case "stream": {
        // Prints each arg as a chunk with a pause, so a concurrent call interleaves with it.
        for (const arg of args) {
          ctx.execution.log("stdout", `${arg}\n`);
          await sleep(20);
        }
        ctx.execution.log("stderr", "done\n");
        return { exitCode: 0, timedOut: false, stdout: args.join("\n"), stderr: "done\n" };
      }
      case "echo-stdin":
        return { exitCode: 0, timedOut: false, stdout: params.stdin ?? "", stderr: "" };
      case "big": {
        const size = Number(args[0] ?? 0);
        return { exitCode: 0, timedOut: false, stdout: "x".repeat(size), stderr: "" };
      }
      case "sleep":
        await sleep(Number(args[0] ?? 0));
        return { exitCode: 0, timedOut: false, stdout: "", stderr: "" };
      case "fail":
        throw new Error("boom from the worker");
      case "fail-coded":
        throw Object.assign(new Error("capability denied by fixture"), { code: -32001 });
      case "crash":
        setTimeout(() => process.exit(7), 10);
        await sleep(10_000);
        return { exitCode: 0, timedOut: false, stdout: "", stderr: "" };
      case "host-calls": {
        // ctx.logger -> `log` notification; ctx.state.get -> a worker->host request the client refuses.
        ctx.logger.info("hello from the worker");
        let stateError = "none";
        try {
          await ctx.state.get({ scopeKind: "instance", stateKey: "k" });
        } catch (error) {
          stateError = `${error.code}`;
        }
        return { exitCode: 0, timedOut: false, stdout: stateError, stderr: "" };
      }
      case "env":
        return { exitCode: 0, timedOut: false, stdout: process.env[args[0]] ?? "", stderr: "" };
      default:
        return { exitCode: 127, timedOut: false, stdout: "", stderr: `unknown command ${params.command}` };
    }
  },
  async onShutdown() {
    if (process.env.ECHO_PLUGIN_HANG_ON_SHUTDOWN === "1") await sleep(60_000);
  },
});

export default plugin;
runWorker(plugin, import.meta.url);
