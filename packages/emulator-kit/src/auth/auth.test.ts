import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { runEmulator, type RunningEmulator } from "../emulator.js";
import { echoEmulator } from "../example/echo.js";
import { checkCredential } from "./credential.js";

let emulator: RunningEmulator | undefined;
afterEach(async () => {
  await emulator?.close();
  emulator = undefined;
});

describe("auth helpers", () => {
  it("answers 401 for a missing or unknown API key, in the vendor's envelope", async () => {
    emulator = await runEmulator(echoEmulator);
    const missing = await fetch(`${emulator.url}/items`);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ code: 401, message: "missing credentials" });
    const wrong = await fetch(`${emulator.url}/items`, { headers: { "x-api-key": "echo_wrong" } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ code: 401, message: "invalid API key" });
    expect((await fetch(`${emulator.url}/items`, { headers: { "x-api-key": emulator.credentials.apiKey! } })).status).toBe(200);
  });

  it("answers 401 with a challenge for a bad bearer token and 403 when the token lacks the permission", async () => {
    emulator = await runEmulator(echoEmulator);
    const none = await fetch(`${emulator.url}/admin/stats`);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="echo"');
    const basic = await fetch(`${emulator.url}/admin/stats`, { headers: { authorization: `Basic ${Buffer.from("a:b").toString("base64")}` } });
    expect(basic.status).toBe(401);
    const user = await fetch(`${emulator.url}/admin/stats`, { headers: { authorization: `Bearer ${emulator.credentials.token}` } });
    expect(user.status).toBe(403);
    expect(await user.json()).toEqual({ code: 403, message: "admin token required" });
    const admin = await fetch(`${emulator.url}/admin/stats`, { headers: { authorization: `Bearer ${emulator.credentials.adminToken}` } });
    expect(await admin.json()).toEqual({ items: 0 });
  });

  it("refuses a WebSocket upgrade with 401 before the handshake; accepts the token as a query parameter", async () => {
    emulator = await runEmulator(echoEmulator);
    const url = `${emulator.url.replace("http", "ws")}/ws/echo`;
    const status = await new Promise<number>((resolve) => {
      const socket = new WebSocket(url);
      socket.once("unexpected-response", (_req, res) => resolve(res.statusCode!));
      socket.once("open", () => resolve(101));
    });
    expect(status).toBe(401);
    const socket = new WebSocket(`${url}?access_token=${emulator.credentials.token}`, ["v4.echo", "v5.echo"]);
    await new Promise((resolve) => socket.once("open", resolve));
    expect(socket.protocol).toBe("v5.echo"); // the server's preference among those offered
    socket.close();
  });

  it("checkCredential separates missing, invalid and forbidden", () => {
    const rule = { accept: { alpha: { scopes: ["read"] } }, authorize: (p: { scopes: string[] }) => p.scopes.includes("write") };
    expect(checkCredential(undefined, rule)).toEqual({ ok: false, reason: "missing" });
    expect(checkCredential("beta", rule)).toEqual({ ok: false, reason: "invalid" });
    expect(checkCredential("alpha", rule)).toEqual({ ok: false, reason: "forbidden" });
    expect(checkCredential("alpha", { accept: ["alpha"] })).toEqual({ ok: true, principal: "alpha" });
  });
});
