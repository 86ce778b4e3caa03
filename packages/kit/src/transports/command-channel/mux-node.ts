/**
 * The in-sandbox side of the command channel for images that have Node (every agent runtime does:
 * the host's own bridge runs on it). Plain CommonJS for `node -e`, kept a string so nothing
 * rewrites it on the way: it is the program the sandbox runs, not code of this package.
 *
 * argv: [stateDir]. It reads request lines on stdin and writes reply lines on stdout (protocol.ts).
 * Every command runs as `/bin/sh -c script` in a session of its own (`detached`), with the
 * environment and working directory this process was started with: what a fresh exec gets.
 * Claims: a command is started only after `mkdir stateDir/<id>` succeeded (the command writes its
 * pid into it before its script runs), so a host that lost the channel can tell, from a second
 * exec, whether it ran, and end it. The
 * state directory is removed on a clean exit only when every claim was acknowledged; otherwise
 * the host's recovery exec reads and removes it.
 */
export const NODE_MUX_SOURCE = `"use strict";
const cp = require("child_process"), fs = require("fs"), path = require("path"), net = require("net");
if (typeof fs.rmSync !== "function") process.exit(98);
try { process.title = "paperclip-channel"; } catch (e) {}
const DIR = process.argv[1];
const DRAIN_MS = 200;
const PRELUDE = 'echo $$ >"$1/pid"; exec /bin/sh -c "$2"';
const env = Object.assign({}, process.env);
try { fs.mkdirSync(DIR, { mode: 0o700 }); } catch (e) { process.stderr.write("paperclip-channel: cannot create " + DIR + ": " + e.code + "\\n"); process.exit(97); }
let out;
try { out = new net.Socket({ fd: 1, readable: false, writable: true }); } catch (e) { out = process.stdout; }
out.on("error", () => quit(0));
const jobs = new Map();
const claims = new Set();
let blocked = false, closing = false, kills = 0, quitting = null;
const b64 = (s) => Buffer.from(s, "utf8").toString("base64");
function push(data) {
  if (out.write(data) || blocked) return;
  blocked = true;
  out.once("drain", () => { blocked = false; for (const j of jobs.values()) flow(j); });
}
function send(line) { push(line + "\\n"); }
function quit(code) {
  if (kills > 0) { quitting = code; return; }
  if (claims.size === 0) try { fs.rmSync(DIR, { recursive: true, force: true }); } catch (e) {}
  process.exit(code);
}
function group(pid, sig) { try { process.kill(-pid, sig); return true; } catch (e) { return false; } }
function flow(j) {
  const go = !blocked && (j.window === null || j.window > 0);
  for (const s of [j.child.stdout, j.child.stderr]) if (!s.destroyed) go ? s.resume() : s.pause();
}
function release(ack) {
  for (const id of claims) if (id <= ack) { claims.delete(id); fs.rm(path.join(DIR, String(id)), { recursive: true, force: true }, () => {}); }
}
function finish(j) {
  if (j.done) return;
  j.done = true;
  clearTimeout(j.deadline); clearTimeout(j.drain);
  for (const s of [j.child.stdout, j.child.stderr]) s.destroy();
  if (j.child.stdin) j.child.stdin.destroy();
  jobs.delete(j.id);
  const x = j.exit;
  send("D " + j.id + " " + (x.code === null ? "-" : x.code) + " " + (x.signal || "-") + " " + (j.timedOut ? 1 : 0));
  if (closing && jobs.size === 0) quit(0);
}
function settle(j) { if (j.exit && j.open === 0) finish(j); }
function armDrain(j) {
  clearTimeout(j.drain);
  j.drain = setTimeout(() => {
    if (blocked || (j.window !== null && j.window <= 0)) return armDrain(j);
    j.open = 0;
    finish(j);
  }, DRAIN_MS);
}
function end(j, graceMs) {
  if (j.kill) return;
  const pid = j.child.pid;
  group(pid, "SIGTERM");
  kills += 1;
  j.kill = setTimeout(() => { group(pid, "SIGKILL"); kills -= 1; if (quitting !== null && kills === 0) quit(quitting); }, graceMs);
}
function start(f) {
  const id = +f[1], mode = f[3], timeoutMs = +f[4], graceMs = +f[5], window = +f[6];
  release(+f[2]);
  const claim = path.join(DIR, String(id));
  try { fs.mkdirSync(claim); } catch (e) { return send("F " + id + " " + b64("already claimed (" + e.code + ")")); }
  claims.add(id);
  let child;
  try {
    // The command records its own pid (its group) in the claim before the script runs: a host
    // recovering after this process died between the spawn and the S reply can still end it.
    child = cp.spawn("/bin/sh", ["-c", PRELUDE, "sh", claim, Buffer.from(f[7], "base64").toString("utf8")], { detached: true, env, stdio: [mode === "n" ? "ignore" : "pipe", "pipe", "pipe"] });
  } catch (e) { child = null; }
  if (!child || child.pid === undefined) {
    if (child) child.on("error", () => {});
    fs.rm(claim, { recursive: true, force: true }, () => {});
    claims.delete(id);
    return send("F " + id + " " + b64("spawn failed"));
  }
  const j = { id, child, window: window > 0 ? window : null, open: 2, exit: null, timedOut: false, done: false, deadline: null, drain: null, kill: null };
  jobs.set(id, j);
  send("S " + id + " " + child.pid);
  child.on("error", () => {});
  if (child.stdin) {
    child.stdin.on("error", () => {});
    if (mode === "i") child.stdin.end(Buffer.from(f[8] || "", "base64"));
  }
  for (const [s, tag] of [[child.stdout, "O"], [child.stderr, "X"]]) {
    s.on("data", (c) => {
      push(tag + " " + id + " " + c.length + "\\n");
      push(c);
      if (j.window !== null) j.window -= c.length;
      flow(j);
      if (j.exit) armDrain(j);
    });
    s.on("end", () => { j.open -= 1; settle(j); });
    s.on("error", () => {});
  }
  child.on("exit", (code, signal) => { j.exit = { code, signal }; armDrain(j); settle(j); });
  if (timeoutMs > 0) j.deadline = setTimeout(() => { j.timedOut = true; end(j, graceMs); }, timeoutMs);
}
function handle(f) {
  const j = jobs.get(+f[1]);
  switch (f[0]) {
    case "R": return start(f);
    case "I": if (j && j.child.stdin) { const b = Buffer.from(f[2], "base64"); j.child.stdin.write(b, () => send("C " + j.id + " " + b.length)); } return;
    case "E": if (j && j.child.stdin) j.child.stdin.end(); return;
    case "K": if (j) end(j, +f[2] || 250); return;
    case "W": if (j && j.window !== null) { j.window += +f[2]; flow(j); } return;
    case "A": return release(+f[1]);
    case "Q": closing = true; if (jobs.size === 0) quit(0); return;
  }
}
let buf = "";
process.stdin.setEncoding("latin1");
process.stdin.on("data", (c) => {
  buf += c;
  let at;
  while ((at = buf.indexOf("\\n")) >= 0) { const line = buf.slice(0, at); buf = buf.slice(at + 1); if (line) handle(line.split(" ")); }
});
process.stdin.on("end", () => { closing = true; if (jobs.size === 0) quit(0); });
process.stdin.on("error", () => { closing = true; if (jobs.size === 0) quit(0); });
send("H 1 node " + process.pid + " " + b64(DIR) + " stream,window " + process.version);
`;
