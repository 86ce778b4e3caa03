#!/usr/bin/env node
/**
 * The Paperclip runner app for Coder workspaces, started by the template's agent (see
 * ../template/main.tf): `node paperclip-runner.js`, configured by environment:
 *
 *   PAPERCLIP_RUNNER_PORT   port on the workspace's loopback (default 4100; the coder_app url)
 *   PAPERCLIP_RUNNER_HOST   address to listen on (default 127.0.0.1: only the agent reaches it)
 *   PAPERCLIP_RUNNER_CWD    where commands run unless a request names a cwd (default $HOME)
 */
import os from "node:os";
import { createRunnerServer, DEFAULT_OPTIONS } from "./server.js";

const port = Number(process.env.PAPERCLIP_RUNNER_PORT ?? "4100");
const host = process.env.PAPERCLIP_RUNNER_HOST ?? "127.0.0.1";
const defaultCwd = process.env.PAPERCLIP_RUNNER_CWD ?? process.env.HOME ?? os.homedir();
if (!Number.isInteger(port) || port < 1 || port > 65_535) {
  process.stderr.write(`paperclip-runner: PAPERCLIP_RUNNER_PORT must be a port number (got ${JSON.stringify(process.env.PAPERCLIP_RUNNER_PORT)})\n`);
  process.exit(64);
}

const { server, killAll } = createRunnerServer({ ...DEFAULT_OPTIONS, defaultCwd });
server.listen(port, host, () => process.stdout.write(`paperclip-runner listening on ${host}:${port}\n`));
server.on("error", (error) => {
  process.stderr.write(`paperclip-runner: ${error.message}\n`);
  process.exit(1);
});
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    killAll();
    server.close();
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 100).unref();
  });
}
