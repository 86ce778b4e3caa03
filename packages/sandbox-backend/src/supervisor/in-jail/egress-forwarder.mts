/** The host-side egress proxy on the jail's loopback: TCP 127.0.0.1:port -> the bind-mounted Unix socket. */
import net from "node:net";

export function startEgressForwarder(egress: { port: number; socketPath: string }, log: (message: string) => void): void {
  const server = net.createServer((inbound) => {
    const outbound = net.connect(egress.socketPath);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
    const close = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on("error", close);
    outbound.on("error", close);
  });
  server.on("error", (error) => log(`egress forwarder: ${error.message}`));
  server.listen(egress.port, "127.0.0.1");
}
