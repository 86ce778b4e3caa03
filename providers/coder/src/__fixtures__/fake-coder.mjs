#!/usr/bin/env node
// A stand-in for the coder CLI's `ssh` (the real one speaks Coder's tailnet, which no loopback
// emulator can serve): `coder ssh <owner>/<workspace>.<agent> -- <command>` runs <command> in that
// workspace through the runner app's stream route, with the CLI's own environment contract
// (CODER_URL, CODER_SESSION_TOKEN, CODER_CONFIG_DIR), stdin streamed and the exit status returned.
import WebSocket from "ws";

const [verb, target, separator, command, ...extra] = process.argv.slice(2);
const fail = (message, code = 1) => {
  process.stderr.write(`fake-coder: ${message}\n`);
  process.exit(code);
};
if (verb !== "ssh" || separator !== "--" || !command || extra.length > 0) fail(`usage: coder ssh <owner>/<workspace>.<agent> -- <command> (got ${process.argv.slice(2).length} arguments)`, 2);
const { CODER_URL: url, CODER_SESSION_TOKEN: token, CODER_CONFIG_DIR: configDir } = process.env;
if (!url || !token) fail("CODER_URL and CODER_SESSION_TOKEN must be set");
if (!configDir) fail("CODER_CONFIG_DIR must be set (the plugin gives the CLI a config dir of its own)");
const match = /^([^/]+)\/([^.]+)\.(.+)$/.exec(target);
if (!match) fail(`bad target ${target}`);
const [, owner, workspace, agent] = match;

const response = await fetch(`${url}/api/v2/users/${owner}/workspace/${workspace}`, { headers: { "coder-session-token": token } });
if (!response.ok) fail(`workspace ${workspace}: HTTP ${response.status}`);
const socket = new WebSocket(`${url.replace(/^http/, "ws")}/@${owner}/${workspace}.${agent}/apps/paperclip-runner/stream`, { headers: { cookie: `coder_session_token=${token}` } });
const frame = (type, body) => Buffer.concat([Buffer.of(type), Buffer.isBuffer(body) ? body : Buffer.from(body === undefined ? "" : JSON.stringify(body))]);
socket.on("open", () => {
  // An SSH session's shell: the user's login environment.
  socket.send(
    frame(0x01, { script: command, env: { PATH: "/home/coder/.local/bin:/usr/local/bin:/usr/bin:/bin", HOME: "/home/coder", USER: "coder", LANG: "C.UTF-8" }, envMode: "replace", stdin: true }),
  );
});
socket.on("message", (data) => {
  const body = data.subarray(1);
  if (data[0] === 0x11) {
    process.stdin.on("data", (chunk) => socket.send(frame(0x02, chunk)));
    process.stdin.on("end", () => socket.send(frame(0x03)));
  } else if (data[0] === 0x12) process.stdout.write(body);
  else if (data[0] === 0x13) process.stderr.write(body);
  else if (data[0] === 0x14) {
    const exit = JSON.parse(body.toString());
    process.stdout.end(() => process.exit(exit.exitCode ?? 255));
  } else if (data[0] === 0x15) fail(body.toString());
});
socket.on("unexpected-response", (_req, res) => fail(`stream: HTTP ${res.statusCode}`, 255));
socket.on("error", (error) => fail(error.message, 255));
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, () => (socket.terminate(), process.exit(255)));
