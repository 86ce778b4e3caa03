// Preloaded (node --import) into a CLI run that must contact no vendor: every TCP connect and DNS
// lookup is refused before it happens and reported on stderr as "NETWORK CONTACT ...".
import dns from "node:dns";
import net from "node:net";

const report = (what) => process.stderr.write(`NETWORK CONTACT ${what}\n`);
const refused = () => Object.assign(new Error("network refused by the test"), { code: "ECONNREFUSED" });

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  const options = typeof args[0] === "object" && args[0] !== null && !Array.isArray(args[0]) ? args[0] : null;
  const pathTarget = options ? options.path : typeof args[0] === "string" && !/^\d+$/.test(args[0]) ? args[0] : undefined;
  if (pathTarget !== undefined) return connect.apply(this, args); // a Unix socket: local
  const host = options ? (options.host ?? "localhost") : (args[1] ?? "localhost");
  const port = options ? options.port : args[0];
  report(`tcp ${host}:${port}`);
  process.nextTick(() => this.destroy(refused()));
  return this;
};
const lookup = dns.lookup;
dns.lookup = function (hostname, ...rest) {
  report(`dns ${hostname}`);
  const callback = rest.at(-1);
  if (typeof callback === "function") process.nextTick(() => callback(refused()));
  return undefined;
};
void lookup;
dns.promises.lookup = async (hostname) => {
  report(`dns ${hostname}`);
  throw refused();
};
