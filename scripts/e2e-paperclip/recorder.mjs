// E2E call recorder: a template that prepare-copy.mjs writes over the worker entry of the COPIED plugin.
// It runs the real worker in this same process and appends one JSON line per host->worker request
// and per response to a file. The real worker is the renamed original file.
// The host's protocol is NDJSON JSON-RPC on stdin/stdout. Values under secret-looking keys are
// redacted, and so are secret-looking NAME=value assignments in strings. Execute stdin/stdout and duplex
// channel bytes are never logged, only their sizes: bridge traffic carries credentials.
import fs from "node:fs";
import { pathToFileURL } from "node:url";

const REAL_WORKER = __REAL_WORKER__;
const RECORD_FILE = __RECORD_FILE__;
const SECRET_KEY = /(key|token|secret|password|passwd|jwt|credential|authorization|cookie)/i;
// Secret-looking NAME=value assignments inside strings (a duplex launch command is `exec env PAPERCLIP_BRIDGE_TOKEN='...' node ...`).
const SECRET_ASSIGNMENT = /\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|JWT|NONCE|CREDENTIAL)[A-Z0-9_]*=)('[^']*'|"[^"]*"|[^\s'"]+)/g;
const pending = new Map(); // id -> {method, t, lease}
// Names that match SECRET_KEY but hold no secret: the login's command key ("codex", "claude", "grok").
const NAMED_KEYS = new Set(["loginCommandKey"]);
// Login terminal output is recorded (the e2e checks the prompt and the echo) with the OAuth token and
// every URL query (state, challenge) cut out; the e2e's fake CLIs are the only programs it sees.
const redactTerminal = (text) => text.replace(/sk-ant-[A-Za-z0-9_-]+/g, "<token>").replace(/(https?:\/\/[^\s?]+)\?\S*/g, "$1?<query>");

function redact(value, depth = 0) {
  if (depth > 12) return "…";
  if (typeof value === "string") {
    const text = value.replace(SECRET_ASSIGNMENT, "$1<redacted>");
    return text.length > 600 ? `${text.slice(0, 600)}…(${text.length} chars)` : text;
  }
  if (Array.isArray(value)) return value.slice(0, 60).map((v) => redact(v, depth + 1));
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      // Execute stdin/stdout and duplex channel bytes (`data`) carry bridge traffic, credentials included.
      if (k === "stdin" || k === "stdout" || k === "data") out[k] = typeof v === "string" ? `<${v.length} chars>` : v;
      else if (k === "leaseMetadata" || k === "workspaceRealization") out[k] = "<omitted>";
      else if (SECRET_KEY.test(k) && !NAMED_KEYS.has(k) && v !== "" && v !== null && typeof v !== "boolean") out[k] = "<redacted>";
      else out[k] = redact(v, depth + 1);
    }
    return out;
  }
  return value;
}

function write(entry) {
  try {
    fs.appendFileSync(RECORD_FILE, `${JSON.stringify(entry)}\n`);
  } catch {
    /* recording is best effort */
  }
}

function lineSplitter(onLine) {
  let buf = "";
  return (chunk) => {
    buf += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim()) onLine(line);
    }
  };
}

const fromHost = lineSplitter((line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.method && msg.id !== undefined) {
    const p = msg.params ?? {};
    pending.set(msg.id, { method: msg.method, t: Date.now() });
    const params = msg.method === "initialize" ? {} : redact(p);
    if (params?.lease && typeof params.lease === "object") params.lease = { providerLeaseId: p.lease?.providerLeaseId };
    write({ t: new Date().toISOString(), dir: "call", id: msg.id, method: msg.method, params });
  }
});

const fromWorker = lineSplitter((line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if ((msg.method === "loginPty.output" || msg.method === "loginPty.exit") && msg.id === undefined) {
    const p = msg.params ?? {};
    const params = { hostRouteId: p.hostRouteId, workerSessionId: p.workerSessionId, ...(typeof p.chunk === "string" ? { chunk: redactTerminal(p.chunk) } : { exitCode: p.exitCode }) };
    write({ t: new Date().toISOString(), dir: "notify", method: msg.method, params });
    return;
  }
  if (msg.id !== undefined && !msg.method && pending.has(msg.id)) {
    const { method, t } = pending.get(msg.id);
    pending.delete(msg.id);
    let result = msg.result;
    if (method === "environmentExecute" && result && typeof result === "object") {
      result = {
        exitCode: result.exitCode,
        signal: result.signal,
        timedOut: result.timedOut,
        stdoutChars: result.stdout?.length ?? 0,
        stderrTail: typeof result.stderr === "string" ? result.stderr.slice(-300) : undefined,
      };
    } else if (method === "initialize") {
      result = { supportedMethods: result?.supportedMethods };
    } else {
      result = redact(result);
    }
    write({ t: new Date().toISOString(), dir: "reply", id: msg.id, method, ms: Date.now() - t, ...(msg.error ? { error: redact(msg.error) } : { result }) });
  }
});

const originalWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  fromWorker(chunk);
  return originalWrite(chunk, ...rest);
};
// runWorker() starts the RPC host only when process.argv[1] is the worker module itself.
// An e2e-only measurement switch (run.sh E2E_COMMAND_CHANNEL): the host passes plugin workers no
// environment of ours, so the wrapper sets the kit's command-channel switch before the real worker loads.
const COMMAND_CHANNEL = __COMMAND_CHANNEL__;
if (COMMAND_CHANNEL) process.env.PAPERCLIP_SANDBOX_COMMAND_CHANNEL = COMMAND_CHANNEL;
process.argv[1] = REAL_WORKER;
await import(pathToFileURL(REAL_WORKER).href);
// Listen only after the worker's own reader is attached: stdin stays paused (buffered) until then,
// so no host message can reach this listener alone. The first request may go unrecorded.
process.stdin.on("data", fromHost);
