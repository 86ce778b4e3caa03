// The example emulator end to end: real HTTP, real jails, the kit's recorder and faults.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runEmulator, type RunningEmulator } from "@paperclip-sandbox/emulator-kit";
import { emulator } from "./index.js";

let running: RunningEmulator;
const call = async (method: string, route: string, body?: unknown, token = running.credentials.token) => {
  const response = await fetch(`${running.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
};

beforeAll(async () => {
  running = await runEmulator(emulator, {});
});
afterAll(async () => {
  await running?.close();
});

describe("example emulator", () => {
  it("creates a labelled sandbox, runs a command in its jail, lists it by label and deletes it (confirmed)", async () => {
    const created = await call("POST", "/v1/sandboxes", { labels: { "paperclip-run": "r1" } });
    expect(created.status).toBe(201);
    const id = created.body!.id as string;
    const exec = await call("POST", `/v1/sandboxes/${id}/exec`, { script: "cat; id -u; echo err >&2; exit 4", stdin: Buffer.from("in\n").toString("base64") });
    expect(exec.body).toMatchObject({ exitCode: 4, timedOut: false });
    expect(Buffer.from(exec.body!.stdout as string, "base64").toString()).toBe("in\n1000\n");
    expect(Buffer.from(exec.body!.stderr as string, "base64").toString()).toBe("err\n");
    const listed = await call("GET", "/v1/sandboxes?label=paperclip-run=r1");
    expect((listed.body!.sandboxes as Array<{ id: string }>).map((s) => s.id)).toEqual([id]);
    expect((await call("DELETE", `/v1/sandboxes/${id}`)).status).toBe(204);
    expect((await call("GET", `/v1/sandboxes/${id}`)).body).toEqual({ error: { status: 404, message: `sandbox ${id} not found` } });
    expect(await running.leftovers()).toEqual([]);
  });

  it("answers 401 without a valid token and records every call by route", async () => {
    running.requests.reset();
    expect((await call("GET", "/v1/sandboxes", undefined, "wrong")).status).toBe(401);
    const records = running.requests.list();
    expect(records.map((r) => `${r.method} ${r.route} ${r.status}`)).toEqual(["GET /v1/sandboxes 401"]);
    expect(JSON.stringify(records)).not.toContain(running.credentials.token);
  });

  it("injects a 503 on a route and then recovers", async () => {
    running.faults.inject({ route: "/v1/sandboxes", method: "POST", kind: "status", status: 503, times: 1 });
    expect((await call("POST", "/v1/sandboxes", {})).status).toBe(503);
    const created = await call("POST", "/v1/sandboxes", {});
    expect(created.status).toBe(201);
    await call("DELETE", `/v1/sandboxes/${created.body!.id as string}`);
  });
});
