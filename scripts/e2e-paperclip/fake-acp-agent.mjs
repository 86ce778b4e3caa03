#!/usr/bin/env node
// Fake ACP agent for credential-free end-to-end runs of the host's ACP engine (claude_local with
// engine "acp"); it runs INSIDE the sandbox under the host's process-session wrapper. It speaks ACP
// (JSON-RPC 2.0, one message a line, over stdio): `initialize`, `session/new`, then on
// `session/prompt` it streams one `agent_message_chunk`, marks the task done with a comment in one
// PATCH through the Paperclip API the host gives it (PAPERCLIP_API_URL is the in-sandbox callback
// bridge), and ends the turn. Any other request gets an empty result. It never prints secret values.
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const RUN = process.env.PAPERCLIP_RUN_ID || "norun";
const send = (message) => process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
let sessions = 0;

async function markDone() {
  const { PAPERCLIP_API_URL: url, PAPERCLIP_API_KEY: key, PAPERCLIP_TASK_ID: task } = process.env;
  if (!url || !key || !task) return "skipped";
  try {
    const res = await fetch(`${url}/api/issues/${task}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${key}`, "x-paperclip-run-id": RUN, "content-type": "application/json" },
      body: JSON.stringify({ status: "done", comment: `e2e-fake-acp run=${RUN}` }),
      signal: AbortSignal.timeout(20_000),
    });
    return String(res.status);
  } catch {
    return "000";
  }
}

async function handle(message) {
  const { id, method, params } = message;
  if (id === undefined || method === undefined) return; // a notification or a response: nothing to answer
  if (method === "initialize") {
    send({ id, result: { protocolVersion: params?.protocolVersion ?? 1, agentCapabilities: { loadSession: false }, authMethods: [] } });
  } else if (method === "session/new") {
    send({ id, result: { sessionId: `fake-acp-${process.pid}-${++sessions}` } });
  } else if (method === "session/prompt") {
    const done = await markDone();
    try {
      writeFileSync(`./E2E_ACP_OUTPUT_${RUN}.txt`, `run=${RUN}\ndone_http=${done}\n`);
    } catch {
      // A read-only cwd changes nothing the host checks.
    }
    send({ method: "session/update", params: { sessionId: params?.sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `fake acp agent: done=${done}` } } } });
    send({ id, result: { stopReason: "end_turn" } });
  } else {
    send({ id, result: {} });
  }
}

const lines = createInterface({ input: process.stdin });
let chain = Promise.resolve();
lines.on("line", (line) => {
  if (!line.trim()) return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  chain = chain.then(() => handle(message));
});
lines.on("close", () => void chain.then(() => process.exit(0)));
